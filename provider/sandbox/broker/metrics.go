package broker

import (
	"net/http"
	"slices"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// Metrics answers GET /metrics with the broker's figures in the
// Prometheus text format: per box, the model requests it made and the
// tokens the upstream said they took (what the box cannot under-report),
// the refusals by reason, and the tokens valid now.
func (b *Broker) Metrics() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		live := float64(b.Live())
		b.mu.Lock()
		boxes := make([]string, 0, len(b.usage))
		for box := range b.usage {
			boxes = append(boxes, box)
		}
		slices.Sort(boxes)
		perBox := func(name, help string, get func(*Usage) int64) *dto.MetricFamily {
			f := &dto.MetricFamily{Name: &name, Help: &help, Type: dto.MetricType_COUNTER.Enum()}
			for _, box := range boxes {
				v := float64(get(b.usage[box]))
				f.Metric = append(f.Metric, &dto.Metric{Label: []*dto.LabelPair{label("box", box)}, Counter: &dto.Counter{Value: &v}})
			}
			return f
		}
		fams := []*dto.MetricFamily{
			perBox("boxctl_broker_requests_total", "Model requests a box made through the broker.", func(u *Usage) int64 { return u.Requests }),
			perBox("boxctl_broker_input_tokens_total", "Input tokens the upstream said a box's requests took.", func(u *Usage) int64 { return u.InputTokens }),
			perBox("boxctl_broker_output_tokens_total", "Output tokens the upstream said a box's requests took.", func(u *Usage) int64 { return u.OutputTokens }),
		}
		refused := &dto.MetricFamily{Name: new("boxctl_broker_refused_total"), Help: new("Requests the broker refused, by reason."),
			Type: dto.MetricType_COUNTER.Enum()}
		for _, why := range slices.Sorted(func(yield func(Refusal) bool) {
			for k := range b.refusals {
				if !yield(k) {
					return
				}
			}
		}) {
			v := float64(b.refusals[why])
			refused.Metric = append(refused.Metric, &dto.Metric{Label: []*dto.LabelPair{label("reason", string(why))}, Counter: &dto.Counter{Value: &v}})
		}
		b.mu.Unlock()
		fams = append(fams, refused, &dto.MetricFamily{Name: new("boxctl_broker_live_tokens"), Help: new("Box tokens valid now."),
			Type: dto.MetricType_GAUGE.Enum(), Metric: []*dto.Metric{{Gauge: &dto.Gauge{Value: &live}}}})
		format := expfmt.NewFormat(expfmt.TypeTextPlain)
		w.Header().Set("Content-Type", string(format))
		enc := expfmt.NewEncoder(w, format)
		for _, f := range fams {
			if len(f.Metric) == 0 {
				continue
			}
			if err := enc.Encode(f); err != nil {
				return
			}
		}
	})
}

func label(name, value string) *dto.LabelPair { return &dto.LabelPair{Name: &name, Value: &value} }
