package e2bemu

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
)

// Sandbox metrics (GET /sandboxes/{id}/metrics) from the Docker engine's
// stats of the container and df in it, and the typed 501 of the routes of
// the spec this emulator does not serve.

func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	sb, ok := s.lookup(r.PathValue("sandboxID"))
	if !ok {
		s.notFound(w, r.PathValue("sandboxID"))
		return
	}
	m, err := s.metrics(r.Context(), sb)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "Error getting sandbox metrics: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, []map[string]any{m})
}

// metrics is one SandboxMetric of the sandbox now.
func (s *Server) metrics(ctx context.Context, sb *sandbox) (map[string]any, error) {
	resp, err := s.cli.ContainerStats(ctx, sb.box.ID(), false)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var st container.StatsResponse
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("decode stats: %w", err)
	}
	cpuPct := 0.0
	if d, sys := float64(st.CPUStats.CPUUsage.TotalUsage)-float64(st.PreCPUStats.CPUUsage.TotalUsage),
		float64(st.CPUStats.SystemUsage)-float64(st.PreCPUStats.SystemUsage); d > 0 && sys > 0 {
		cpuPct = d / sys * float64(max(st.CPUStats.OnlineCPUs, 1)) * 100 / float64(sb.cpuCount)
	}
	memTotal := int64(sb.memoryMB) << 20
	if l := int64(st.MemoryStats.Limit); l > 0 && l < memTotal {
		memTotal = l
	}
	cache := int64(st.MemoryStats.Stats["inactive_file"])
	var diskUsed, diskTotal int64
	if res, err := s.runAs(ctx, sb, "root", nil, "df", "-P", "-B1", "/"); err == nil && res.code == 0 {
		lines := strings.Split(strings.TrimSpace(string(res.stdout)), "\n")
		if f := strings.Fields(lines[len(lines)-1]); len(f) >= 4 {
			diskTotal, _ = strconv.ParseInt(f[1], 10, 64)
			diskUsed, _ = strconv.ParseInt(f[2], 10, 64)
		}
	}
	now := time.Now().UTC()
	return map[string]any{"timestamp": now.Format(time.RFC3339Nano), "timestampUnix": now.Unix(),
		"cpuCount": sb.cpuCount, "cpuUsedPct": cpuPct, "memUsed": int64(st.MemoryStats.Usage) - cache,
		"memTotal": memTotal, "memCache": cache, "diskUsed": diskUsed, "diskTotal": diskTotal}, nil
}

// notEmulated are the routes of the spec this emulator answers 501, by
// the feature they serve.
var notEmulated = map[string][]string{
	"sandbox logs":           {"GET /sandboxes/{sandboxID}/logs", "GET /v2/sandboxes/{sandboxID}/logs"},
	"team and fleet metrics": {"GET /sandboxes/metrics", "GET /teams", "GET /teams/{teamID}/metrics", "GET /teams/{teamID}/metrics/max"},
	"secrets":                {"GET /secrets", "POST /secrets", "GET /secrets/{secretID}", "POST /secrets/{secretID}", "DELETE /secrets/{secretID}"},
	"volumes":                {"GET /volumes", "POST /volumes", "GET /volumes/{volumeID}", "DELETE /volumes/{volumeID}"},
	"template management": {"GET /templates", "GET /v2/templates", "GET /templates/{templateID}",
		"PATCH /templates/{templateID}", "PATCH /v2/templates/{templateID}", "GET /templates/{templateID}/builds/{buildID}/logs",
		"GET /templates/{templateID}/files/{hash}", "GET /templates/{templateID}/tags",
		"POST /templates/tags", "DELETE /templates/tags"},
}

// NotEmulatedCode is the error_code of the 501 answers of routes this
// emulator does not serve.
const NotEmulatedCode = "not_emulated"

func (s *Server) routeNotEmulated() {
	for feature, routes := range notEmulated {
		for _, rt := range routes {
			s.api.HandleFunc(rt, func(w http.ResponseWriter, _ *http.Request) {
				writeJSON(w, http.StatusNotImplemented, map[string]any{"code": http.StatusNotImplemented,
					"message": feature + " (" + rt + ") are not emulated", "error_code": NotEmulatedCode})
			})
		}
	}
}
