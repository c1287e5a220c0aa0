package release

import (
	"cmp"
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/google/uuid"
	"github.com/package-url/packageurl-go"
)

// writeSBOM writes a CycloneDX JSON SBOM of the release to w. Its
// component is the module at opts.Version; under it are the commands the
// archives hold (cmd/boxctl, cmd/box-bridge), each depending on the Go
// modules and the standard library that its binaries, on any platform,
// record (debug/buildinfo). Its serial number is derived from the
// archives' digests, its timestamp is opts.Time.
func writeSBOM(w io.Writer, opts Options, bins map[Build]string, archives []File) error {
	var root *cdx.Component
	comps := map[string]cdx.Component{}
	deps := map[string]map[string]bool{}
	for _, b := range slices.SortedFunc(maps.Keys(bins), compareBuilds) {
		bi, err := buildinfo.ReadFile(bins[b])
		if err != nil {
			return fmt.Errorf("sbom: %s: %w", b, err)
		}
		if root == nil {
			c := moduleComponent(cdx.ComponentTypeApplication, bi.Main.Path, opts.Version, "")
			c.Properties = &[]cdx.Property{{Name: "vcs.revision", Value: opts.Commit}}
			root = &c
		}
		cmd := moduleComponent(cdx.ComponentTypeApplication, bi.Main.Path, opts.Version, strings.TrimPrefix(bi.Path, bi.Main.Path+"/"))
		cmd.Name = path.Base(bi.Path)
		comps[cmd.BOMRef] = cmd
		addDep(deps, root.BOMRef, cmd.BOMRef)
		std := moduleComponent(cdx.ComponentTypeLibrary, "stdlib", bi.GoVersion, "")
		comps[std.BOMRef] = std
		addDep(deps, cmd.BOMRef, std.BOMRef)
		for _, m := range bi.Deps {
			for m.Replace != nil {
				m = m.Replace
			}
			c := moduleComponent(cdx.ComponentTypeLibrary, m.Path, m.Version, "")
			comps[c.BOMRef] = c
			addDep(deps, cmd.BOMRef, c.BOMRef)
		}
	}
	if root == nil {
		return errors.New("sbom: no binaries")
	}
	var sums strings.Builder
	for _, f := range archives {
		fmt.Fprintf(&sums, "%s  %s\n", f.SHA256, f.Name)
	}
	bom := cdx.NewBOM()
	bom.SerialNumber = uuid.NewSHA1(uuid.NameSpaceURL, []byte(root.PackageURL+"\n"+sums.String())).URN()
	bom.Metadata = &cdx.Metadata{Timestamp: opts.Time.Format(time.RFC3339), Component: root}
	list := slices.SortedFunc(maps.Values(comps), func(a, b cdx.Component) int { return cmp.Compare(a.BOMRef, b.BOMRef) })
	bom.Components = &list
	var dl []cdx.Dependency
	for _, ref := range slices.Sorted(maps.Keys(deps)) {
		on := slices.Sorted(maps.Keys(deps[ref]))
		dl = append(dl, cdx.Dependency{Ref: ref, Dependencies: &on})
	}
	bom.Dependencies = &dl
	return cdx.NewBOMEncoder(w, cdx.BOMFileFormatJSON).SetPretty(true).Encode(bom)
}

// moduleComponent is a Go module (or a package of one, at subpath) as a
// component whose reference is its package URL.
func moduleComponent(typ cdx.ComponentType, module, version, subpath string) cdx.Component {
	ns, name := path.Split(module)
	purl := packageurl.NewPackageURL(packageurl.TypeGolang, strings.TrimSuffix(ns, "/"), name, version, nil, subpath).ToString()
	return cdx.Component{BOMRef: purl, Type: typ, Name: module, Version: version, PackageURL: purl}
}

func addDep(deps map[string]map[string]bool, from, to string) {
	if deps[from] == nil {
		deps[from] = map[string]bool{}
	}
	deps[from][to] = true
}

func compareBuilds(a, b Build) int {
	return cmp.Or(cmp.Compare(a.Package, b.Package), cmp.Compare(a.Platform.OS, b.Platform.OS),
		cmp.Compare(a.Platform.Arch, b.Platform.Arch))
}
