// Package openapi builds the OpenAPI 3.1 document of the bridge protocol:
// every route, its request and response bodies, error answers and
// headers, with schemas reflected from the bridge/wire types. The server
// serves the checked-in rendering of it (bridge/server/openapi.json),
// which a golden test keeps equal to Document.
package openapi
