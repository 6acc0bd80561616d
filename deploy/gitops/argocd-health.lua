-- Argo CD health of the six kinds (Postgres, Redis, BlobStorage,
-- SMTPCredentialSet, PostgresSnapshot, RedisSnapshot) from status.phase,
-- which the operator writes: complete is Healthy (its Secret can be
-- used), failed is Degraded (the message says what to change), paused
-- (spec.skipCreate) is Suspended, anything else Progressing.
-- docs/gitops.md says how to install it; tests/integration/deploy.rs runs it.
local hs = {}
local status = obj.status or {}
local phase = status.phase
local message = status.message or ""
if phase == "complete" then
  hs.status = "Healthy"
elseif phase == "failed" then
  hs.status = "Degraded"
elseif phase == "paused" then
  hs.status = "Suspended"
else
  hs.status = "Progressing"
  if phase == nil then
    message = "waiting for the cloud-resource-operator to pick it up"
  end
end
hs.message = message
return hs
