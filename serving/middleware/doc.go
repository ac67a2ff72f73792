// Package middleware holds the HTTP server's request stages, one a file,
// in the manner of chi's middleware: each is a func(http.Handler)
// http.Handler made from what it needs (a logger, an instrument, the
// function that answers an error as a problem), never from the server
// itself. The server (package serving) chains them in front of its
// routes; what stages and handlers share (the request id, status marks,
// the problem writer) lives below both, in serving/problem.
//
// The stages here, in the order the server chains them:
//
//   - [DeadlineBody] bounds the time to read a request's body;
//   - [RequestID] tags each request with an id;
//   - [Observe] traces, meters and logs each request;
//   - [Recoverer] answers a handler's panic with a 500 problem;
//   - [Identify] stores who the request comes from ([PrincipalFrom]);
//   - [RateLimit] applies a token bucket per principal ([Limiter]);
//   - [Auth] refuses a request without a valid API key where one is needed;
//   - [ReadBody] reads the body whole, within its caps and the body budget;
//   - [Admit] bounds the requests handled at once ([Admission]);
//   - [Timeout] answers a request not done within its time budget.
package middleware
