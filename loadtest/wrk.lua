-- wrk script of loadtest/compare.sh: POSTs the AdmissionReview in the file $BODY as JSON over
-- wrk's keep-alive connections, counts which answers were the expected one, and prints one
-- machine-readable line when done.
--
--   BODY=review.json [EXPECT='"allowed":true'] [PATHS="/mutate?timeout=10s /validate?timeout=10s"] \
--     wrk -s wrk.lua URL
--
-- PATHS (optional): the request paths to cycle through, one after another (each wrk thread
-- cycles over its connections' requests); the URL's own path otherwise.
-- EXPECT (optional): the expected answer: a status and a space ("504 ": that status), or text
-- the body of an HTTP 200 must contain ('"allowed":true', '"patchType":"JSONPatch"'). Every
-- answer is then counted as expected or other; compare.sh counts only the expected ones as
-- throughput. Last line of output:
--   wrk-result requests=N duration_us=D p50_us=… p99_us=… p999_us=… max_us=… mean_us=…
--              connect_errors=… read_errors=… write_errors=… timeouts=… non2xx=…
--              [expected=… other=… s429=… other_statuses=STATUS:COUNT,…]
-- (`other_statuses`: the statuses of the other answers, `-` when there were none.)

local function read_body()
  local name = assert(os.getenv("BODY"), "set BODY to the review file")
  local file = assert(io.open(name, "rb"))
  local body = file:read("*a")
  file:close()
  return body
end

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = read_body()

local paths = {}
for path in string.gmatch(os.getenv("PATHS") or "", "%S+") do
  paths[#paths + 1] = path
end

if #paths > 0 then
  local requests, next_one = {}, 0
  function init(args)
    for i, path in ipairs(paths) do
      requests[i] = wrk.format(nil, path)
    end
  end
  function request()
    next_one = next_one % #requests + 1
    return requests[next_one]
  end
end

-- The threads, to read their counters when done (each thread has a Lua state of its own).
local threads = {}
function setup(thread)
  threads[#threads + 1] = thread
end

local expect = os.getenv("EXPECT") or ""
local expect_status = tonumber(string.match(expect, "^(%d%d%d) $"))

-- Per thread (globals of the thread's state, read with thread:get).
expected, other, s429 = 0, 0, 0
other_statuses = {}

-- Whether one answer is the expected one.
function is_expected(status, body)
  if expect_status then
    return status == expect_status
  end
  return status == 200 and body ~= nil and string.find(body, expect, 1, true) ~= nil
end

if expect ~= "" then
  function response(status, headers, body)
    if is_expected(status, body) then
      expected = expected + 1
    else
      other = other + 1
      other_statuses[status] = (other_statuses[status] or 0) + 1
    end
    if status == 429 then
      s429 = s429 + 1
    end
  end
end

function done(summary, latency, requests)
  local e = summary.errors
  local counted = ""
  if expect ~= "" then
    local sums, by_status = { expected = 0, other = 0, s429 = 0 }, {}
    for _, thread in ipairs(threads) do
      for name in pairs(sums) do
        sums[name] = sums[name] + (thread:get(name) or 0)
      end
      for status, count in pairs(thread:get("other_statuses") or {}) do
        by_status[status] = (by_status[status] or 0) + count
      end
    end
    local statuses = {}
    for status, count in pairs(by_status) do
      statuses[#statuses + 1] = string.format("%d:%d", status, count)
    end
    table.sort(statuses)
    counted = string.format(" expected=%d other=%d s429=%d other_statuses=%s", sums.expected, sums.other,
      sums.s429, #statuses > 0 and table.concat(statuses, ",") or "-")
  end
  io.write(string.format(
    "wrk-result requests=%d duration_us=%d p50_us=%.1f p99_us=%.1f p999_us=%.1f max_us=%d mean_us=%.1f " ..
    "connect_errors=%d read_errors=%d write_errors=%d timeouts=%d non2xx=%d%s\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    latency:percentile(99.9), latency.max, latency.mean, e.connect, e.read, e.write, e.timeout, e.status,
    counted))
end
