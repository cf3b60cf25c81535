package cellsim

import (
	"time"
)

// Faults strike at exponentially distributed intervals, each kind on its
// own clock, until the run's fault phase ends; heal then undoes whatever is
// still broken, and the cell is given time to converge.

func (w *World) scheduleFaults() {
	every := func(mean time.Duration, strike func()) {
		if mean <= 0 {
			return
		}
		var tick func()
		tick = func() {
			if w.healing {
				return
			}
			strike()
			w.at(nil, w.exp(mean), tick)
		}
		w.at(nil, w.exp(mean), tick)
	}
	every(w.faults.MasterCrash, w.crashMaster)
	every(w.faults.MasterPause, w.pauseMaster)
	every(w.faults.SameNameRestart, w.restartUnderSameName)
	every(w.faults.ClockJump, w.jumpClock)
	every(w.faults.StoreDown, w.storeDown)
	every(w.faults.StorePartition, w.partitionStore)
	every(w.faults.AgentCrash, w.crashAgent)
	every(w.faults.MachineReboot, w.rebootMachine)
	every(w.faults.AgentIsland, w.isolateAgent)
	every(w.faults.MasterIsland, w.isolateMaster)
}

func (w *World) pickMaster() *Master { return w.masters[w.rng.IntN(len(w.masters))] }
func (w *World) pickAgent() *Agent   { return w.agentList[w.rng.IntN(len(w.agentList))] }

// crashMaster is kill -9 of a master; a supervisor starts it again.
func (w *World) crashMaster() {
	m := w.pickMaster()
	if m.node.down {
		return
	}
	w.Crashes++
	m.crash()
	w.at(nil, w.between(500*time.Millisecond, 10*time.Second), func() {
		if m.node.down {
			m.start()
		}
	})
}

// pauseMaster is SIGSTOP then SIGCONT: it resumes believing what it
// believed, with whatever it had in flight.
func (w *World) pauseMaster() {
	m := w.pickMaster()
	if m.node.down {
		return
	}
	w.Pauses++
	until := w.now.Add(w.between(time.Second, 15*time.Second))
	if until.After(m.node.pausedUntil) {
		m.node.pausedUntil = until
	}
	w.tracef("%s: paused until %s", m.name, until.Sub(epoch0))
}

// restartUnderSameName pauses a master (the leader when one leads) and has
// a supervisor start a second process under its name meanwhile, while the
// old one's lease may still be live. The old process resumes believing it
// leads; it is killed for good some time later, as an operator would.
func (w *World) restartUnderSameName() {
	old := w.pickMaster()
	for _, m := range w.masters {
		if m.leading {
			old = m
		}
	}
	if old.node.down {
		return
	}
	w.SameNameRestarts++
	until := w.now.Add(w.between(leaseTTL/4, 3*leaseTTL))
	if until.After(old.node.pausedUntil) {
		old.node.pausedUntil = until
	}
	fresh := w.newMaster(old.name)
	fresh.skew = old.skew
	for i, m := range w.masters {
		if m == old {
			w.masters[i] = fresh
		}
	}
	w.ghosts = append(w.ghosts, old)
	w.tracef("%s#%s: paused until %s; %s started again under its name", old.name, old.incarnation, until.Sub(epoch0), old.name)
	fresh.start()
	w.at(nil, until.Sub(w.now)+w.between(time.Second, time.Minute), func() { w.killGhost(old) })
}

// killGhost kills an old process for good.
func (w *World) killGhost(g *Master) {
	for i, m := range w.ghosts {
		if m == g {
			w.ghosts = append(w.ghosts[:i], w.ghosts[i+1:]...)
			if !g.node.down {
				g.crash()
			}
			return
		}
	}
}

// processes are the masters' running processes: each replica's current one
// and the ghosts.
func (w *World) processes() []*Master {
	return append(append([]*Master(nil), w.masters...), w.ghosts...)
}

// jumpClock moves a master's clock: back by up to an hour, forward by up to
// half a minute, or back to the true time.
func (w *World) jumpClock() {
	m := w.pickMaster()
	w.Jumps++
	switch w.rng.IntN(3) {
	case 0:
		m.skew = -w.between(time.Second, time.Hour)
	case 1:
		m.skew = w.between(time.Second, 30*time.Second)
	default:
		m.skew = 0
	}
	w.tracef("%s: clock skew now %s", m.name, m.skew)
}

// storeDown makes the database unreachable for everyone for a while.
func (w *World) storeDown() {
	if w.log.Down() {
		return
	}
	w.StoreOutages++
	w.log.SetDown(true)
	w.tracef("store down")
	w.at(nil, w.between(500*time.Millisecond, 10*time.Second), func() {
		w.log.SetDown(false)
		w.tracef("store up")
	})
}

func (w *World) partition(a, b string, d time.Duration) {
	l := linkOf(a, b)
	w.cuts[l]++
	w.at(nil, d, func() {
		if w.cuts[l] > 0 {
			w.cuts[l]--
		}
	})
}

// partitionStore cuts one master off the database.
func (w *World) partitionStore() {
	m := w.pickMaster()
	w.Partitions++
	d := w.between(time.Second, 12*time.Second)
	w.tracef("%s cut off the store for %s", m.name, d)
	w.partition(m.name, w.db.name, d)
}

// crashAgent is kill -9 of an agent: its tasks run on.
func (w *World) crashAgent() {
	a := w.pickAgent()
	if a.node.down {
		return
	}
	w.AgentCrashes++
	a.crash()
	w.tracef("%s: agent crashed", a.name)
	w.at(nil, w.between(200*time.Millisecond, 10*time.Second), func() {
		if a.node.down {
			a.restart()
		}
	})
}

// rebootMachine ends the machine's processes and its agent.
func (w *World) rebootMachine() {
	a := w.pickAgent()
	if a.node.down {
		return
	}
	w.Reboots++
	a.reboot()
	w.tracef("%s: machine rebooted", a.name)
	w.at(nil, w.between(2*time.Second, 20*time.Second), func() {
		if a.node.down {
			a.restart()
		}
	})
}

// isolateAgent cuts one machine off every master.
func (w *World) isolateAgent() {
	a := w.pickAgent()
	w.Partitions++
	d := w.between(time.Second, 25*time.Second)
	w.tracef("%s cut off the masters for %s", a.name, d)
	for _, m := range w.masters {
		w.partition(a.name, m.name, d)
	}
}

// isolateMaster cuts one master off two thirds of the machines, more than
// agentlink.LossHoldPercent of them: the fault is the master's network.
func (w *World) isolateMaster() {
	m := w.pickMaster()
	w.Partitions++
	d := w.between(time.Second, 25*time.Second)
	n := (2*len(w.agentList) + 2) / 3
	w.tracef("%s cut off %d machines for %s", m.name, n, d)
	for _, i := range w.rng.Perm(len(w.agentList))[:n] {
		w.partition(w.agentList[i].name, m.name, d)
	}
}

// heal ends every fault at once: partitions, lost and slow messages, the
// store's outage, pauses, clock skews, crashed processes. The clients stop
// sending new requests and tasks stop exiting on their own, so that what
// follows is the cell converging, with nothing new to converge to.
func (w *World) heal() {
	w.healing = true
	w.faults.Loss, w.faults.SlowMessages = 0, 0
	clear(w.cuts)
	w.log.SetDown(false)
	for len(w.ghosts) > 0 {
		w.killGhost(w.ghosts[0])
	}
	for _, m := range w.masters {
		m.node.pausedUntil = time.Time{}
		m.skew = 0
		if m.node.down {
			m.start()
		}
	}
	for _, a := range w.agentList {
		if a.node.down {
			a.restart()
		}
	}
	if w.chk.shadow != nil {
		w.clients[0].endUpdates(w.chk.shadow)
	}
	w.tracef("healed")
}
