package commands

import (
	"fmt"
	"strings"
)

// Names lists every command type, by the name Name gives it. A test holds
// it to the types that have a decide method, so that guards over "every
// command" (the simulation's coverage test) cannot miss a new one.
func Names() []string {
	return []string{
		"CloseBillingPeriod", "CommitUpdate", "CreateAllocSet", "DrainMachine", "KillJob", "KillTask",
		"PlaceTasks", "PromoteUpdate", "RecordLossHold", "RecordPendingReasons", "RegisterMachine", "RemoveAllocSet", "RemoveMachine",
		"ReportAgentState", "RollbackUpdate", "RollingUpdateStep", "SetPriceSheet", "SetQuota",
		"SubmitJob", "UpdateJob", "UpdateMachine",
	}
}

// Name is a command's type name, as recorded in CommandRefused.
func Name(cmd Command) string {
	name := fmt.Sprintf("%T", cmd)
	return name[strings.LastIndex(name, ".")+1:]
}
