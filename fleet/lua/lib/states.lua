-- A job's states on the broker: queued, running, scheduled (a delay or a
-- retry's wait), waiting (for its children or a person), or its outcome's
-- name (ok, error, deadline_exceeded, cancelled, rejected, dead). The names
-- the job object shows (hourglass/jobs/job_state.hpp; lua_twins_test.cpp
-- holds the two lists to one). Scripts write states.queued, never the bare
-- name: a misspelt state is an error the broker answers, not a new state.
local states = setmetatable({
  queued = 'queued', running = 'running', scheduled = 'scheduled', waiting = 'waiting',
  ok = 'ok', error = 'error', deadline_exceeded = 'deadline_exceeded', cancelled = 'cancelled',
  rejected = 'rejected', dead = 'dead',
}, {__index = function(_, name) error('no job state ' .. tostring(name)) end})

-- A job in `state` may still run: no outcome yet.
local function unfinished(state)
  return state == states.queued or state == states.running or state == states.scheduled or state == states.waiting
end
