-- Admission on the broker, as the daemon judges it (admit_at_enqueue,
-- freshness.cpp; a test holds the two to one table): what is left of a
-- job's freshness, or of its overall deadline, less the fleet's predicted
-- wait, must cover its minimum budget, at least 1 us. Microseconds; a wait
-- of -1 is unbounded (no live slot serves the backlog): never admitted.
local function admits(left_us, wait_us, need_us)
  return wait_us >= 0 and left_us - wait_us >= math.max(need_us, 1)
end
