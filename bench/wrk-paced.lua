-- wrk-paced.lua: paced scrapers for bench/exporter_bench.py (`wrk -s bench/wrk-paced.lua`).
-- Each connection waits between PACE_MS / 2 and 3 * PACE_MS / 2 (uniformly, mean PACE_MS)
-- after every response before its next request, like a scraper with an interval rather than
-- a saturating client: N connections make about N * 1000 / PACE_MS scrapes/s in all (80 for
-- bench/exporter_bench.py's 8 at 100 ms). The spread keeps the connections from arriving in lockstep, as independent
-- scrapers do not. wrk starts a request's latency when the request is written, so the wait
-- is not counted in the reported latency.
local PACE_MS = 100

function delay()
	return math.random(PACE_MS / 2, 3 * PACE_MS / 2)
end
