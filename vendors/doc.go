// Package vendors defines what boxctl needs of a place that runs boxes: the
// Vendor and Box interfaces, the create specification, and the typed
// errors every vendor returns. No one vendor's code is here: docker, e2b,
// daytona and kubernetes implement it in their own packages, each
// exporting a type named Vendor, and vendortest is the behavioural suite
// every one of them must pass. What several vendors do alike is here,
// written once for them and for a vendor written outside this module (see
// "Written once for the vendors" below), over the public packages beside
// it: the box labels (vendors/boxmeta) and the process layer
// (vendors/boxproc).
//
// # The contract
//
// A box is a finite-lifetime machine from an image. Create starts one and
// returns once it runs; its lifetime is required and finite, and the
// vendor enforces it on its side (a box whose caller crashed still ends at
// its deadline). Every box carries the labels of package vendors/boxmeta
// (managed, run tag, owner, deadline, version) so that List and gc can find
// it without any record of the caller's.
//
// A vendor honours a fixed set of create fields (Vendor.Supports). Callers
// refuse a spec that sets any other field before any vendor call, with
// Check; a vendor that is given one anyway returns *UnsupportedError.
//
// Errors mean the same on every vendor and are tested with errors.Is and
// errors.As: ErrNotFound (the box does not exist, or no longer does),
// ErrGone (the box vanished while an operation was running in it),
// *RateLimitError (throttled or over quota, with the wait the vendor
// asked for), *UnsupportedError (a create field the vendor cannot honour).
//
// Destroy is idempotent: destroying a box that is already gone returns
// nil. Connect and every Box method of a box that does not exist return an
// error matching ErrNotFound.
//
// # Ownership
//
// A Box value holds no resources of its own that need closing beyond what
// its methods return: the reader of Process.Output and the Process itself
// are closed by their caller; a Vendor that holds connections has Close.
// Processes started with Spawn live on in the box independently of the
// caller's context and of the Process value: only Signal, the process's own
// end, or the box's end stops them.
//
// # Publishing images
//
// A vendor that makes boxes from images of its own kind (an E2B template,
// a Daytona snapshot) implements ImageImporter: it turns a box image
// pushed to an OCI registry into one, and returns the reference
// CreateSpec.Image takes. One whose vendor hosts the registry too
// implements ImageRegistry, which names where to push. boximage.Publish
// (what `boxctl build` runs for a vendor's target, with the importer
// vendors/open.Importer opens) publishes through these.
//
// # Written once for the vendors
//
// What more than one vendor does alike is here, and no vendor writes it
// again:
//
//   - the create: Check (a spec against what a vendor honours), Labels and
//     Tag (the labels, create token and environment of a box), CreateToken,
//     Resources.Or (a spec's limits over a vendor's defaults);
//   - its retries and clean-up: IdempotentCreate (a create on a control
//     plane whose answer may be lost, retried with a back-off without ever
//     leaving a second box), Landed (the look-up after a create cut short)
//     and Discard (the removal of a box a Create could not finish);
//   - the processes: Procs (Spawn, Process, Read and Write over the process
//     layer, vendors/boxproc, which a Box embeds), StreamExec (Exec over a
//     streaming exec) and EndEarlier (a resumed box's earlier processes
//     ended);
//   - the endpoints: Endpoint.Client and Endpoint.Shared, the HTTP client
//     of a box's port over the vendor's transport (a tunnel), with the
//     vendor's headers on every request;
//   - the errors and listings: NotFound (an API's "no such object" as
//     ErrNotFound) and HasLabels (List's filter).
//
// None of it speaks a vendor's API: each vendor hands it the calls of its
// own (a create, a find, a destroy, an exec).
package vendors
