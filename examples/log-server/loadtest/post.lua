-- wrk script: POSTs one record of RECORD_BYTES bytes per request and prints one
-- machine-readable RESULT line when done (used by loadtest.sh).
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/octet-stream"
local bytes = tonumber(os.getenv("RECORD_BYTES") or "1024")
wrk.body = string.rep("r", bytes)

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "RESULT requests=%d rps=%.0f p50_us=%d p90_us=%d p99_us=%d p999_us=%d errors=%d\n",
    summary.requests,
    summary.requests / (summary.duration / 1e6),
    latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency:percentile(99.9),
    e.connect + e.read + e.write + e.status + e.timeout))
end
