/** Feature folder products/: the product catalogue (/api/products). */
/** /api/products: reads for any authenticated caller, writes for ADMIN. */
import { Elysia, t } from "elysia";
import type { AppContext } from "../../context";
import type { Walk } from "../../http/route-sample";
import { documentedHeaders, errorResponses } from "../../http/route-docs";
import { Product, ProductBody, ProductIdParams, ProductListQuery } from "./model";
import { createProduct, findProduct, listProducts, replaceProduct } from "./service";

const errors = errorResponses(400, 401, 403, 404, 409);

export const productsRoutes = (ctx: AppContext) =>
  new Elysia({ prefix: "/api/products", tags: ["Products"] })
    .use(ctx.auth)
    .get(
      "",
      async ({ query, set }) => {
        const { products, total } = await listProducts(ctx.db, query);
        set.headers["x-total-count"] = String(total);
        return products;
      },
      {
        access: { allow: "authenticated", scope: "products:read", withoutUser: true },
        sample: () => ({ path: "/api/products", status: 200 }),
        query: ProductListQuery,
        response: { 200: t.Array(Product), ...errors },
        detail: {
          summary: "List products",
          description: "Every product (optionally of one status), or one page when page or size is given. The total is in X-Total-Count.",
          ...documentedHeaders({ 200: ["X-Total-Count"] }),
        },
      },
    )
    .get("/:id", ({ params }) => findProduct(ctx.db, params.id), {
      access: { allow: "authenticated", scope: "products:read", withoutUser: true },
      sample: (walk: Walk) => ({ path: `/api/products/${walk.productId}`, status: 200 }),
      params: ProductIdParams,
      response: { 200: Product, ...errors },
      detail: { summary: "Get a product" },
    })
    .post(
      "",
      async ({ body, caller, set }) => {
        const product = await createProduct(ctx.db, body, caller.email, new Date(ctx.now()));
        set.status = 201;
        return product;
      },
      {
        access: { allow: "ADMIN", scope: "products:write" },
        sample: () => ({ path: "/api/products", body: { name: "Walk Item 2", code: "WALK-2", price: 3, stock: 1 }, status: 201 }),
        body: ProductBody,
        response: { 201: Product, ...errors },
        detail: { summary: "Create a product", description: "A taken code gives 409 DUPLICATE_PRODUCT_CODE; a price with more than 2 fraction digits is refused, never rounded." },
      },
    )
    .put("/:id", ({ params, body, caller }) => replaceProduct(ctx.db, params.id, body, caller.email, new Date(ctx.now())), {
      access: { allow: "ADMIN", scope: "products:write" },
      sample: (walk: Walk) => ({ path: `/api/products/${walk.productId}`, body: { name: "Walk Item", code: "WALK-1", price: 11, stock: 5 }, status: 200 }),
      params: ProductIdParams,
      body: ProductBody,
      response: { 200: Product, ...errors },
      detail: { summary: "Replace a product", description: "Every field is replaced; createdAt and createdBy stay." },
    });
