package fleet

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// schemaMarkdown is the README's table of cols.
func schemaMarkdown(cols []Column) string {
	var b strings.Builder
	b.WriteString("| column | type | unit | rows | meaning |\n|---|---|---|---|---|\n")
	for _, c := range cols {
		unit, rows := c.Unit, c.Rows
		if unit == "" {
			unit = "—"
		}
		if rows == "" {
			rows = "all"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", c.Name, c.Type, unit, rows, c.Meaning)
	}
	return b.String()
}

// TestREADMESchema: the README gives both files' schema as Columns has
// it (go test ./pkg/fleet -run READMESchema -v prints the tables).
func TestREADMESchema(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cols []Column
	}{{StatsTable, StatsColumns}, {WhatifTable, WhatifColumns}} {
		md := schemaMarkdown(tc.cols)
		t.Logf("%s:\n%s", tc.name, md)
		if !strings.Contains(string(readme), md) {
			t.Errorf("README.md lacks %s's schema as pkg/fleet has it (go test ./pkg/fleet -run READMESchema -v prints it)", tc.name)
		}
	}
}

// TestREADMESpark: the README's Spark SQL queries are its DuckDB queries,
// the same SELECTs over views of the same names: only how the files are
// opened differs.
func TestREADMESpark(t *testing.T) {
	selects := func(engine string) []string {
		var out []string
		for _, q := range readmeQueries(t, engine) {
			if !strings.HasPrefix(strings.ToUpper(q), "CREATE ") {
				out = append(out, q)
			}
		}
		return out
	}
	duck, spark := selects("DuckDB"), selects("Spark SQL")
	if len(duck) == 0 || !slices.Equal(duck, spark) {
		t.Errorf("the README's DuckDB and Spark SQL queries differ:\nDuckDB:\n%s\nSpark SQL:\n%s", strings.Join(duck, ";\n"), strings.Join(spark, ";\n"))
	}
}

// readmeQueries are the ```sql blocks of the README's Fleets section whose
// first line is "-- ENGINE".
func readmeQueries(t *testing.T, engine string) []string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	sec := string(readme)
	i := strings.Index(sec, "\n## Fleets")
	if i < 0 {
		t.Fatal("README.md has no Fleets section")
	}
	sec = sec[i+1:]
	if j := strings.Index(sec, "\n## "); j >= 0 {
		sec = sec[:j]
	}
	var out []string
	for _, m := range regexp.MustCompile("(?s)```sql\n(.*?)```").FindAllStringSubmatch(sec, -1) {
		if strings.HasPrefix(m[1], "-- "+engine) {
			for _, q := range strings.Split(m[1], ";\n") {
				// Without its comment lines: they name the engine.
				if q = strings.TrimSpace(regexp.MustCompile(`(?m)^--.*\n?`).ReplaceAllString(q, "")); q != "" {
					out = append(out, q)
				}
			}
		}
	}
	return out
}
