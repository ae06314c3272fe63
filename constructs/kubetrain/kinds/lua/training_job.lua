-- Health of a training run (PyTorchJob, MPIJob, TrainJob, JobSet) from its status conditions.
-- Written for Argo CD's sandbox: no standard library (no string, table, math, os; not even
-- ipairs), so only the language itself: numeric for, #, .., comparisons.
-- Final states win over the others: a run that restarted and then failed still lists a Running
-- condition. Succeeded (Kubeflow), Complete (TrainJob) and Completed (JobSet) mean the same.
local function describe(condition)
  if condition.message ~= nil and condition.message ~= "" then
    return condition.message
  end
  if condition.reason ~= nil and condition.reason ~= "" then
    return condition.type .. ": " .. condition.reason
  end
  return condition.type
end

local conditions = {}
if obj.status ~= nil and obj.status.conditions ~= nil then
  conditions = obj.status.conditions
end

local latest = nil
local suspended = nil
for i = 1, #conditions do
  local condition = conditions[i]
  if condition.status == "True" then
    if condition.type == "Failed" then
      return {status = "Degraded", message = describe(condition)}
    end
    if condition.type == "Succeeded" or condition.type == "Complete" or condition.type == "Completed" then
      return {status = "Healthy", message = describe(condition)}
    end
    if condition.type == "Suspended" then
      suspended = condition
    end
    latest = condition
  end
end

if suspended ~= nil then
  return {status = "Suspended", message = describe(suspended)}
end
if latest ~= nil then
  return {status = "Progressing", message = describe(latest)}
end
-- No condition is true, e.g. a TrainJob that was resumed (Suspended=False) and runs: say the last word.
if #conditions > 0 then
  return {status = "Progressing", message = describe(conditions[#conditions])}
end
return {status = "Progressing", message = "Waiting for the operator to start the run"}
