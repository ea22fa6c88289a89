// Package emftest reads the embedded-metric-format lines out of a function's log and checks
// each against the rules of CloudWatch's specification
// (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html),
// so that the package's tests and the Lambda harness check the same thing.
package emftest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Metric is one metric value an EMF line carries: its namespace, name, value and dimensions
// (name to value).
type Metric struct {
	Namespace  string
	Name       string
	Value      float64
	Dimensions map[string]string
}

// Key is the metric's name and dimension values, sorted, e.g. "Refusals Environment=sandbox
// Function=token Reason=invalid_grant": a line's identity as CloudWatch aggregates it.
func (m Metric) Key() string {
	keys := make([]string, 0, len(m.Dimensions))
	for k, v := range m.Dimensions {
		keys = append(keys, k+"="+v)
	}
	slices.Sort(keys)
	return strings.TrimSpace(m.Name + " " + strings.Join(keys, " "))
}

// Metrics returns every metric of the EMF lines of log (one JSON object per line; lines that
// are not JSON, or JSON without an "_aws" member, are other log lines and skipped), and an
// error naming the first EMF line that breaks the specification.
func Metrics(log string) ([]Metric, error) {
	var out []Metric
	for _, line := range strings.Split(log, "\n") {
		var root map[string]json.RawMessage
		if json.Unmarshal([]byte(line), &root) != nil {
			continue
		}
		if _, ok := root["_aws"]; !ok {
			continue
		}
		ms, err := check(root)
		if err != nil {
			return nil, fmt.Errorf("%w: %s", err, line)
		}
		out = append(out, ms...)
	}
	return out, nil
}

// check applies the specification's rules to one EMF document: "_aws" is an object with a
// Timestamp (a number) and CloudWatchMetrics, an array of directives; each directive has a
// Namespace, Dimensions (an array of dimension sets, each an array of at most 30 member
// names, every one a string member of the root) and Metrics (at most 100, each with a Name
// whose member of the root is a number).
func check(root map[string]json.RawMessage) ([]Metric, error) {
	var aws struct {
		Timestamp         *float64 `json:"Timestamp"`
		CloudWatchMetrics *[]struct {
			Namespace  *string     `json:"Namespace"`
			Dimensions *[][]string `json:"Dimensions"`
			Metrics    *[]struct {
				Name *string `json:"Name"`
				Unit string  `json:"Unit"`
			} `json:"Metrics"`
		} `json:"CloudWatchMetrics"`
	}
	if err := json.Unmarshal(root["_aws"], &aws); err != nil {
		return nil, fmt.Errorf("_aws: %v", err)
	}
	if aws.Timestamp == nil || *aws.Timestamp <= 0 {
		return nil, fmt.Errorf("_aws.Timestamp missing")
	}
	if aws.CloudWatchMetrics == nil || len(*aws.CloudWatchMetrics) == 0 {
		return nil, fmt.Errorf("_aws.CloudWatchMetrics missing or empty")
	}
	str := func(name string) (string, bool) {
		var s string
		return s, json.Unmarshal(root[name], &s) == nil && root[name] != nil
	}
	var out []Metric
	for _, d := range *aws.CloudWatchMetrics {
		if d.Namespace == nil || *d.Namespace == "" || d.Dimensions == nil || d.Metrics == nil {
			return nil, fmt.Errorf("a directive lacks Namespace, Dimensions or Metrics")
		}
		if len(*d.Metrics) == 0 || len(*d.Metrics) > 100 {
			return nil, fmt.Errorf("a directive has %d metrics (1 to 100)", len(*d.Metrics))
		}
		for _, set := range *d.Dimensions {
			if len(set) > 30 {
				return nil, fmt.Errorf("a dimension set of %d (at most 30)", len(set))
			}
			dims := map[string]string{}
			for _, name := range set {
				v, ok := str(name)
				if !ok || v == "" {
					return nil, fmt.Errorf("dimension %q is not a string member of the root", name)
				}
				dims[name] = v
			}
			for _, m := range *d.Metrics {
				if m.Name == nil {
					return nil, fmt.Errorf("a metric without a Name")
				}
				var v float64
				if err := json.Unmarshal(root[*m.Name], &v); err != nil || root[*m.Name] == nil {
					return nil, fmt.Errorf("metric %q has no number member in the root", *m.Name)
				}
				out = append(out, Metric{Namespace: *d.Namespace, Name: *m.Name, Value: v, Dimensions: dims})
			}
		}
	}
	return out, nil
}

// Count sums the values of ms by Key.
func Count(ms []Metric) map[string]float64 {
	c := map[string]float64{}
	for _, m := range ms {
		c[m.Key()] += m.Value
	}
	return c
}
