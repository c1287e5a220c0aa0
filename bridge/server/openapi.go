package server

import (
	_ "embed"
	"net/http"
)

// openAPIDocument is the OpenAPI 3.1 document of the routes below,
// rendered by package bridge/openapi from the wire types (a golden test
// keeps the two equal).
//
//go:embed openapi.json
var openAPIDocument []byte

func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	writeRaw(w, http.StatusOK, openAPIDocument)
}
