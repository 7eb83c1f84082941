// Package approvals keeps the writes that wait for a human's yes, lets
// people decide them from a web page (or a JSON API), and resumes the runs
// that waited.
//
// A Queue holds pending requests in Redis, per tenant: each names the exact
// intent (tool, the canonical arguments the tool marks safe to show, the
// others as fingerprints, the intent's fingerprint), who asked, the run and
// when it expires. Deciding is one atomic step (a Lua script): of two
// approvers deciding at once one wins and the other is told who decided;
// an expired or decided request is refused with the reason. Every request
// and decision is appended to the package's own audit stream per tenant
// (Queue.Audit), naming who asked and who decided.
//
// Inbox is an http.Handler a host mounts in its own server: a list of the
// approver's tenant's pending requests and a page per request with Approve
// and Deny, server-rendered, without JavaScript, under a strict
// Content-Security-Policy, with a CSRF token on every form; beside it a
// JSON API (list, get, decide) for chat bots and other front ends. The host
// authenticates; deciding needs a role in the request's tenant, nobody
// approves their own request unless allowed, and another tenant's request
// is 404 as if it did not exist.
//
// Secrets: a member that holds a secret the tool declares is shown as
// "a secret: withheld", without a fingerprint; what Options.Detector (the
// guard's) finds in a shown member is shown as its placeholder, and a
// hidden member it finds one in is withheld the same way. A parked run's
// state (the conversation, and the arguments the model wrote) is sealed
// with a key derived from Options.SecretKey (AES-256-GCM, seal.go): Redis
// holds no part of it in clear, and only a queue with the same key resumes
// it.
//
// A paused agentloop run is parked (Queue.Park) with its state; when its
// last pending request is decided a Worker, in any process, claims it
// atomically, mints the grants (agentloop.Loop.Grant) and resumes it
// (agentloop.Loop.Resume). Within a run an intent a human denied is not put
// to a human again: it is denied at once. Hosts that prefer to block use
// Waiter, an host.Approver that waits on the inbox until a deadline.
package approvals
