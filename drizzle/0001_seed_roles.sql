-- The two roles the access rules use. Other RoleName values can be added the same way.
INSERT INTO `roles` (`name`, `description`) VALUES ('USER', 'A registered user'), ('ADMIN', 'Full access, includes USER');
