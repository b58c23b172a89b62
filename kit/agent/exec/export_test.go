package exec

// MinDrain is how long a stopped group's output may take before the pipes
// are cut.
const MinDrain = minDrain
