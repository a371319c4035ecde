-- wrk script of loadtest/compare.sh: POSTs the AdmissionReview in the file $BODY as JSON over
-- wrk's keep-alive connections, and prints one machine-readable line when done.
--
--   BODY=review.json [PATHS="/mutate?timeout=10s /validate?timeout=10s"] wrk -s wrk.lua URL
--
-- PATHS (optional): the request paths to cycle through, one after another (each wrk thread
-- cycles over its connections' requests); the URL's own path otherwise. Last line of output:
--   wrk-result requests=N duration_us=D p50_us=… p99_us=… p999_us=… max_us=… mean_us=…
--              connect_errors=… read_errors=… write_errors=… timeouts=… non2xx=…

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

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "wrk-result requests=%d duration_us=%d p50_us=%.1f p99_us=%.1f p999_us=%.1f max_us=%d mean_us=%.1f " ..
    "connect_errors=%d read_errors=%d write_errors=%d timeouts=%d non2xx=%d\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    latency:percentile(99.9), latency.max, latency.mean, e.connect, e.read, e.write, e.timeout, e.status))
end
