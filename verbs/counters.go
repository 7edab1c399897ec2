package verbs

import "github.com/uroce/uroce/qp"

// CounterDesc describes one counter kept in a T (QPCounters or Counters):
// its Go field, its exported name (rxe's hw_counters name where rxe has
// one) and its help text. QPCounterTable and CounterTable, with
// cc.CounterTable for the congestion counters, are what an exporter such
// as package metrics reads.
type CounterDesc[T any] = qp.CounterDesc[T]

var (
	// QPCounterTable describes every counter of QPCounters; a device's
	// Counters holds their sums over its QPs. It is not to be modified.
	QPCounterTable = qp.CounterTable
	// CounterTable describes the counters only a device keeps: the fields
	// of Counters besides the summed QPCounters and the CC counters. It is
	// not to be modified.
	CounterTable = qp.EngineCounterTable
)
