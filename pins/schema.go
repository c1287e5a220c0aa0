package pins

import (
	"github.com/invopop/jsonschema"
	"github.com/tangle-network/boxctl/internal/npmlock"
)

// SchemaID is the $id of the published schema.
const SchemaID = "https://github.com/tangle-network/boxctl/pins/pins.schema.json"

// JSONSchema generates the JSON Schema of the pins data file from the Go
// types. The published pins.schema.json must equal its rendering (a test
// checks it; `go test ./pins -update` rewrites it).
func JSONSchema() ([]byte, error) {
	r := jsonschema.Reflector{
		// Fields are required unless tagged omitempty, as Parse demands.
		RequiredFromJSONSchemaTags: false,
		AllowAdditionalProperties:  false,
	}
	s := r.Reflect(&Pins{})
	s.ID = SchemaID
	s.Title = "boxctl pins"
	s.Description = "Exact versions a boxctl box image is built from."
	return npmlock.Marshal(s)
}
