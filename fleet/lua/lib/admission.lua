-- Admission on the broker, the daemon's one rule (starts_in_time,
-- hourglass/job_bounds.hpp; lua_twins_test.cpp holds the two to one
-- table): what is left of a job's freshness, or of its overall deadline,
-- less the wait before it could start (the fleet's predicted wait, a
-- retry's backoff), must cover its minimum budget, at least 1 us.
-- Microseconds; a wait of -1 is unbounded (no live slot serves the
-- backlog): never admitted.
local function admits(left_us, wait_us, need_us)
  return wait_us >= 0 and left_us - wait_us >= math.max(need_us, 1)
end
