-- A job's states on the broker: queued, running, scheduled (a delay or a
-- retry's wait), waiting (for its children or a person), or its outcome's
-- name (ok, error, deadline_exceeded, cancelled, rejected, dead).

-- A job in `state` may still run: no outcome yet.
local function unfinished(state)
  return state == 'queued' or state == 'running' or state == 'scheduled' or state == 'waiting'
end
