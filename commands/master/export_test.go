package master

// QueuedWrites is how many commands wait in the writer's queue, for tests
// that must know a command is queued before they let the writer go on.
func (m *Master) QueuedWrites() int { return len(m.writes) }
