// Package emukit is what the local emulators of cloud vendors
// (vendors/e2b/e2bemu, vendors/daytona/daytonaemu) share and hold no
// vendor's API in: the fault switches and the middleware that injects
// them into a control plane (Faults, Injector), the switch that sets them
// over HTTP from another process (SwitchPath, Switch), the registry of the
// Docker boxes behind their sandboxes (Registry), and the listener that
// serves an emulator on an address (Listener).
//
// What a fault looks like on the wire (status bodies, retry headers,
// which calls may take effect before a lost answer) is the emulator's:
// an Injector asks its Options for it. Everything else of a fault (the
// odds, the choice of status, the lost call run against a discarded
// answer) is here, once.
//
// # Concurrency
//
// An Injector, a Registry and a Listener are safe for concurrent use.
package emukit
