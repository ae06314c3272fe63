-- Health of a Kueue ClusterQueue or LocalQueue from its Active condition. Written for Argo CD's
-- sandbox: no standard library, only the language itself.
-- An inactive queue admits nothing (a flavor or its ClusterQueue is missing, or misconfigured):
-- Degraded, so the app shows it. A queue stopped on purpose (spec.stopPolicy) is Suspended.
local conditions = {}
if obj.status ~= nil and obj.status.conditions ~= nil then
  conditions = obj.status.conditions
end

for i = 1, #conditions do
  local condition = conditions[i]
  if condition.type == "Active" then
    local message = condition.message
    if message == nil or message == "" then
      message = condition.reason
    end
    if condition.status == "True" then
      return {status = "Healthy", message = message}
    end
    if condition.reason == "Stopped" then
      return {status = "Suspended", message = message}
    end
    if condition.status == "False" then
      return {status = "Degraded", message = message}
    end
    return {status = "Progressing", message = message}
  end
end
return {status = "Progressing", message = "Waiting for Kueue to activate the queue"}
