-- One wrk script for every usersvc scenario, driven by environment variables:
--   BENCH_METHOD (GET), BENCH_PATH ("/api/users/{id}": {id} becomes 1..BENCH_MAX_ID at random),
--   BENCH_TOKEN (bearer), BENCH_BODY (JSON; {email} becomes an address unique to this run),
--   BENCH_STATUS=1 counts answers by status (wrk itself only counts "non-2xx").
-- done() prints one "BENCH_JSON {...}" line that bench/run.ts reads.
local method = os.getenv("BENCH_METHOD") or "GET"
local path = os.getenv("BENCH_PATH") or "/"
local token = os.getenv("BENCH_TOKEN")
local body = os.getenv("BENCH_BODY")
local maxId = tonumber(os.getenv("BENCH_MAX_ID") or "1")
local runTag = os.getenv("BENCH_TAG") or "run"
-- BENCH_DUPLICATE_EVERY=N: every Nth request's {email} is one address of the run (duplicates after its first).
local duplicateEvery = tonumber(os.getenv("BENCH_DUPLICATE_EVERY") or "0")

local threads = {}
local threadId = 0

function setup(thread)
  threadId = threadId + 1
  thread:set("tid", threadId)
  table.insert(threads, thread)
end

local counter = 0
local headers = { ["Content-Type"] = "application/json" }
if token then headers["Authorization"] = "Bearer " .. token end

function init()
  math.randomseed(os.time() + (tid or 0) * 7919)
end

request = function()
  local p = path:gsub("{id}", tostring(math.random(1, maxId)))
  local b = nil
  if body then
    counter = counter + 1
    local email = runTag .. "-" .. tostring(tid or 0) .. "-" .. counter .. "@bench.example.com"
    if duplicateEvery > 0 and counter % duplicateEvery == 0 then email = runTag .. "-dup@bench.example.com" end
    b = body:gsub("{email}", email)
  end
  return wrk.format(method, p, headers, b)
end

if os.getenv("BENCH_STATUS") == "1" then
  statuses = {}
  response = function(status, hdrs, rbody)
    statuses[status] = (statuses[status] or 0) + 1
  end
end

function done(summary, latency, requests)
  local merged = {}
  for _, thread in ipairs(threads) do
    local s = thread:get("statuses")
    if s then
      for code, n in pairs(s) do merged[code] = (merged[code] or 0) + n end
    end
  end
  local parts = {}
  for code, n in pairs(merged) do table.insert(parts, string.format('"%d":%d', code, n)) end
  io.write(string.format(
    'BENCH_JSON {"requests":%d,"durationUs":%d,"p50Us":%d,"p99Us":%d,"errors":%d,"statuses":{%s}}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    table.concat(parts, ",")))
end
