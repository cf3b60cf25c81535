package infrastore

// An evaluator of the FinOps Foundation's FOCUS 1.2 conformance rules
// (model-1.2.json of finopsfoundation/focus_validator, kept beside the
// checkout in shared/focus-spec/rules and never copied here), written from
// the meaning of its check functions. It holds the export to the rules, so
// it is a test kit: it shares nothing with the export's code.
//
// Every check is a predicate per row; a check of the whole column
// (ColumnPresent, the types) holds on every row or on none, and
// CheckDistinctCount holds on a row when the row's group does. A rule
// holds on the rows outside its scope (its Condition and those of the
// composites that reach it); it passes when it holds on every row. A
// composite is the AND or OR, row by row, of the rules it names; a rule it
// names that does not apply, needs judgement (Type Dynamic) or has a
// weaker keyword (a SHOULD inside a MUST) is reported on its own and does
// not decide the composite: in an AND it holds, in an OR it does not.
//
// An absent column reads as null on every row (FOCUS's column handling: a
// column left out is a column of nulls), so its type and format checks
// hold vacuously and only its presence rule speaks of it.

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/corralhq/corral/internal/shareddata"
)

// focusModel is model-1.2.json: the rules and the names of the check
// functions and applicability criteria it defines.
type focusModel struct {
	Details               json.RawMessage
	ModelDatasets         json.RawMessage
	ApplicabilityCriteria map[string]json.RawMessage `json:"ApplicabilityCriteria"`
	CheckFunctions        map[string]json.RawMessage `json:"CheckFunctions"`
	ModelRules            map[string]*focusRule      `json:"ModelRules"`
	currencies            map[string]bool            // currency_codes.csv
	parents               map[string][]string        // rule -> the composites that name it
}

type focusRule struct {
	id                     string
	Function, Reference    string
	EntityType, Notes      string
	ModelVersionIntroduced string
	Status                 string
	Type                   string // Static or Dynamic
	ApplicabilityCriteria  []string
	ValidationCriteria     struct {
		MustSatisfy  string
		Keyword      string
		Requirement  *checkNode
		Condition    *checkNode
		Dependencies []string
	}
}

// checkNode is one call of a check function. Two conditions of the model
// spell it otherwise: {"AND": node or [nodes]} without a CheckFunction,
// and CheckCondition for ColumnName; both are read as what they mean.
type checkNode struct {
	CheckFunction    string
	Items            []*checkNode
	ColumnName       string
	CheckCondition   string
	ColumnAName      string
	ColumnBName      string
	ResultColumnName string
	ModelRuleId      string
	ExpectedCount    json.RawMessage
	ExpectedType     string
	Value            json.RawMessage // absent, null, a string or a number
	AND              json.RawMessage
}

func (n *checkNode) empty() bool {
	return n == nil || (n.CheckFunction == "" && len(n.AND) == 0)
}

// normalize rewrites the model's two odd spellings into plain calls.
func (n *checkNode) normalize() error {
	if n == nil {
		return nil
	}
	if n.CheckFunction == "" && len(n.AND) > 0 {
		var items []*checkNode
		if err := json.Unmarshal(n.AND, &items); err != nil {
			var one checkNode
			if err := json.Unmarshal(n.AND, &one); err != nil {
				return fmt.Errorf("AND: %w", err)
			}
			items = []*checkNode{&one}
		}
		*n = checkNode{CheckFunction: "AND", Items: items}
	}
	if n.ColumnName == "" && n.CheckCondition != "" {
		n.ColumnName = n.CheckCondition
	}
	for _, it := range n.Items {
		if err := it.normalize(); err != nil {
			return err
		}
	}
	return nil
}

// focusSpecDir is shared/focus-spec/rules beside the checkout (the FinOps
// Foundation's model-1.2.json, never copied here).
func focusSpecDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(shareddata.Dir(t, shareddata.FocusSpec), "rules")
	if _, err := os.Stat(filepath.Join(dir, "model-1.2.json")); err != nil {
		t.Fatalf("the FOCUS 1.2 rules (model-1.2.json of finopsfoundation/focus_validator): %v", err)
	}
	return dir
}

func loadFocusModel(t testing.TB) *focusModel {
	t.Helper()
	dir := focusSpecDir(t)
	data, err := os.ReadFile(filepath.Join(dir, "model-1.2.json"))
	if err != nil {
		t.Fatal(err)
	}
	// Every field of the model is known here: a check's argument this
	// evaluator does not read would otherwise be ignored unseen.
	var m focusModel
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("model-1.2.json: %v", err)
	}
	m.parents = map[string][]string{}
	for id, r := range m.ModelRules {
		r.id = id
		if r.Status != "Active" {
			t.Fatalf("%s: status %q (the evaluator knows Active rules only)", id, r.Status)
		}
		for _, n := range []*checkNode{r.ValidationCriteria.Requirement, r.ValidationCriteria.Condition} {
			if err := n.normalize(); err != nil {
				t.Fatalf("%s: %v", id, err)
			}
		}
		for _, child := range ruleRefs(r.ValidationCriteria.Requirement) {
			if m.ModelRules[child] == nil {
				t.Fatalf("%s names %s, which the model does not hold", id, child)
			}
			m.parents[child] = append(m.parents[child], id)
		}
	}
	f, err := os.Open(filepath.Join(dir, "currency_codes.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("currency_codes.csv: %v", err)
	}
	// A header (an index column, then currency_codes) and a code a row.
	codeCol := -1
	if len(recs) > 0 {
		codeCol = slices.Index(recs[0], "currency_codes")
	}
	if codeCol < 0 {
		t.Fatalf("currency_codes.csv has no column currency_codes")
	}
	m.currencies = map[string]bool{}
	for _, rec := range recs[1:] {
		m.currencies[strings.TrimSpace(rec[codeCol])] = true
	}
	if len(m.currencies) < 100 {
		t.Fatalf("currency_codes.csv holds %d codes", len(m.currencies))
	}
	return &m
}

// ruleRefs are the rules a check names through CheckModelRule.
func ruleRefs(n *checkNode) []string {
	if n == nil {
		return nil
	}
	var out []string
	if n.CheckFunction == "CheckModelRule" {
		out = append(out, n.ModelRuleId)
	}
	for _, it := range n.Items {
		out = append(out, ruleRefs(it)...)
	}
	return out
}

// keywordStrength orders the keywords: a requirement of a weaker keyword
// never fails a stronger one.
func keywordStrength(k string) int {
	switch k {
	case "MUST", "MUST NOT":
		return 3
	case "SHOULD", "SHOULD NOT", "RECOMMENDED":
		return 2
	}
	return 1 // MAY, OPTIONAL
}

// focusDataset is an export read back: its columns by name, each value a
// string or null, and for Parquet each column's type.
type focusDataset struct {
	name  string
	typed bool // types come from the file (Parquet); CSV has only text
	rows  int
	cols  map[string]*datasetColumn
}

type datasetColumn struct {
	typ  string // DuckDB's name of the Parquet type; "" in CSV
	vals []string
	null []bool
}

func (d *focusDataset) value(col string, row int) (string, bool) {
	c := d.cols[col]
	if c == nil || c.null[row] {
		return "", false
	}
	return c.vals[row], true
}

// csvDataset reads a CSV export: an empty field is null.
func csvDataset(t testing.TB, name string, data []byte) *focusDataset {
	t.Helper()
	recs, err := csv.NewReader(strings.NewReader(string(data))).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	d := &focusDataset{name: name, rows: len(recs) - 1, cols: map[string]*datasetColumn{}}
	for i, h := range recs[0] {
		c := &datasetColumn{vals: make([]string, d.rows), null: make([]bool, d.rows)}
		for r, rec := range recs[1:] {
			c.vals[r], c.null[r] = rec[i], rec[i] == ""
		}
		d.cols[h] = c
	}
	return d
}

// ruleOutcome is what a rule came to over a dataset.
type ruleOutcome struct {
	status     string // passed, failed, not applicable, dynamic
	violations int
	example    int // a row that fails, -1 if none
	// required is set once the rule was evaluated outside an OR. A rule
	// the model names only as an alternative of an OR (InvoiceId null
	// "when the charge is not associated with an invoice", not null when
	// it is: the when is not in the model) is decided by that OR, and
	// does not fail on its own.
	required bool
}

// focusEvaluation evaluates the model's rules over one dataset for the
// applicability criteria claimed.
type focusEvaluation struct {
	m        *focusModel
	d        *focusDataset
	claimed  map[string]bool
	outcomes map[string]*ruleOutcome
	applies  map[string]bool
}

func evaluateFocus(t testing.TB, m *focusModel, d *focusDataset, claimed []string) *focusEvaluation {
	t.Helper()
	e := &focusEvaluation{m: m, d: d, claimed: map[string]bool{}, outcomes: map[string]*ruleOutcome{}, applies: map[string]bool{}}
	for _, c := range claimed {
		if _, ok := m.ApplicabilityCriteria[c]; !ok {
			t.Fatalf("applicability criterion %s is not in the model", c)
		}
		e.claimed[c] = true
	}
	ids := make([]string, 0, len(m.ModelRules))
	for id := range m.ModelRules {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	all := make([]bool, d.rows)
	for i := range all {
		all[i] = true
	}
	// Roots first (rules no composite names), with every row in scope;
	// each reaches its descendants with its scope.
	for _, id := range ids {
		if len(m.parents[id]) == 0 {
			e.rule(t, id, all, false)
		}
	}
	// What no root reached hangs only under rules that do not apply.
	for _, id := range ids {
		if e.outcomes[id] == nil {
			if e.applicable(id) {
				t.Fatalf("rule %s applies and was never evaluated", id)
			}
			e.outcomes[id] = &ruleOutcome{status: "not applicable", example: -1}
		}
	}
	return e
}

// applicable: every criterion it names is claimed (the model's rules with
// two read "when the provider supports X and Y"), and some composite
// naming it applies (a rule reached only through rules that do not apply
// does not apply either).
func (e *focusEvaluation) applicable(id string) bool {
	if v, ok := e.applies[id]; ok {
		return v
	}
	e.applies[id] = false // cycles, which the model has none of, stop here
	r := e.m.ModelRules[id]
	ok := true
	for _, c := range r.ApplicabilityCriteria {
		ok = ok && e.claimed[c]
	}
	if ok && len(e.m.parents[id]) > 0 {
		ok = false
		for _, p := range e.m.parents[id] {
			ok = ok || e.applicable(p)
		}
	}
	e.applies[id] = ok
	return ok
}

// rule evaluates rule id over the rows in scope, records its outcome
// (merged with earlier ones from other composites) and returns, per row,
// whether it holds, or nil when it does not apply or cannot be checked.
func (e *focusEvaluation) rule(t testing.TB, id string, scope []bool, alternative bool) []bool {
	r := e.m.ModelRules[id]
	out := e.outcomes[id]
	if out == nil {
		out = &ruleOutcome{status: "passed", example: -1}
		e.outcomes[id] = out
	}
	out.required = out.required || !alternative
	if !e.applicable(id) {
		out.status = "not applicable"
		return nil
	}
	if r.Type == "Dynamic" {
		out.status = "dynamic"
		return nil
	}
	if r.ValidationCriteria.Requirement.empty() {
		t.Fatalf("%s: a Static rule without a requirement", id)
	}
	in := slices.Clone(scope)
	if c := r.ValidationCriteria.Condition; !c.empty() {
		cond := e.check(t, r, c, scope, true, false)
		for i := range in {
			in[i] = in[i] && cond[i]
		}
	}
	holds := e.check(t, r, r.ValidationCriteria.Requirement, in, false, false)
	n := 0
	for i := range holds {
		holds[i] = !in[i] || holds[i]
		if !holds[i] {
			n++
			if out.example < 0 {
				out.example = i
			}
		}
	}
	if n > 0 {
		out.status = "failed"
		out.violations = max(out.violations, n)
	}
	return holds
}

var (
	// Numeric format: an integer, a decimal, or E notation whose exponent
	// carries a sign only when negative; no sign for a positive value.
	numericFormat = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?([eE]-?[0-9]+)?$`)
	// Date/time format: extended ISO 8601 with the Z of UTC.
	dateTimeFormat = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$`)
	// Unit format (the spec's unit format attribute): <plural-units>,
	// <singular-unit>-<plural-time-units>, <plural-units>/<singular-time-unit>,
	// <quantity> <plural-units>, <plural-units>/<interval> <plural-time-units>.
	// A count unit is a capitalized noun.
	unitFormat = func() *regexp.Regexp {
		data := `(?:[KMGTPE]i?[bB]|[bB])`
		count := `(?:[A-Z][A-Za-z0-9]*(?: [A-Z][A-Za-z0-9]*)*)`
		timeOne := `(?:Year|Month|Day|Hour|Minute|Second)`
		timeMany := `(?:Years|Months|Days|Hours|Minutes|Seconds)`
		unit := `(?:` + data + `|` + count + `)`
		return regexp.MustCompile(`^(?:` + unit + `|` + unit + `-` + timeMany + `|` + unit + `/` + timeOne +
			`|[1-9][0-9]* ` + unit + `|` + unit + `/[1-9][0-9]* ` + timeMany + `)$`)
	}()
	currencyFormat = regexp.MustCompile(`^[A-Z]{3}$`)
)

func isISODateTime(v string) bool {
	_, err := time.Parse(time.RFC3339, v)
	return err == nil && dateTimeFormat.MatchString(v)
}

func parseDecimal(s string) (*big.Rat, bool) {
	if !numericFormat.MatchString(s) {
		return nil, false
	}
	return new(big.Rat).SetString(s)
}

func isDecimalType(typ string) bool {
	return strings.HasPrefix(typ, "DECIMAL") || typ == "DOUBLE" || typ == "FLOAT"
}

func isDateTimeType(typ string) bool {
	return strings.HasPrefix(typ, "TIMESTAMP") || typ == "DATE"
}

// check evaluates one call of a check function per row. asCondition is
// set when the call selects rows (a Condition) rather than requires.
//
// inOR is set for the items of an OR.
// check evaluates one call of a check function per row. asCondition is
// set when the call selects rows (a Condition) rather than requires.
//
// inOR is set for the items of an OR.
func (e *focusEvaluation) check(t testing.TB, r *focusRule, n *checkNode, scope []bool, asCondition, inOR bool) []bool {
	c := rowCheck{d: e.d, col: n.ColumnName, out: make([]bool, e.d.rows)}
	switch n.CheckFunction {
	case "AND", "OR":
		return e.checkItems(t, r, n, scope, asCondition, c)
	case "CheckModelRule":
		if asCondition {
			t.Fatalf("%s: CheckModelRule in a condition", r.id)
		}
		child := e.m.ModelRules[n.ModelRuleId]
		v := e.rule(t, n.ModelRuleId, scope, inOR)
		if v == nil || keywordStrength(child.ValidationCriteria.Keyword) < keywordStrength(r.ValidationCriteria.Keyword) {
			return nil
		}
		return v
	case "ColumnPresent", "TypeString", "TypeDecimal", "TypeDateTime", "FormatDateTime", "FormatNumeric", "CheckDecimalValue",
		"FormatString", "FormatUnit", "FormatCurrency", "CheckNationalCurrency", "FormatKeyValue":
		return e.checkFormat(t, r, n, c)
	case "CheckValue", "CheckNotValue", "CheckSameValue", "CheckNotSameValue", "CheckGreaterOrEqualThanValue",
		"ColumnByColumnEqualsColumnValue", "CheckDistinctCount":
		return e.checkValues(t, r, n, scope, c)
	}
	t.Fatalf("%s: check function %q is not implemented", r.id, n.CheckFunction)
	return nil
}

// rowCheck builds one check's verdict per row of d into out.
type rowCheck struct {
	d   *focusDataset
	col string // the column the check names
	out []bool
}

func (c rowCheck) each(f func(row int) bool) []bool {
	for i := range c.out {
		c.out[i] = f(i)
	}
	return c.out
}

func (c rowCheck) all(v bool) []bool { return c.each(func(int) bool { return v }) }

// perValue holds on a row whose value is null or passes ok.
func (c rowCheck) perValue(ok func(v string) bool) []bool {
	return c.each(func(i int) bool {
		v, present := c.d.value(c.col, i)
		return !present || ok(v)
	})
}

// checkItems is an AND or an OR of n's items; an item that does not
// decide is left out.
func (e *focusEvaluation) checkItems(t testing.TB, r *focusRule, n *checkNode, scope []bool, asCondition bool, c rowCheck) []bool {
	out := c.out
	if len(n.Items) == 0 {
		t.Fatalf("%s: %s without items", r.id, n.CheckFunction)
	}
	and := n.CheckFunction == "AND"
	c.all(and)
	for _, it := range n.Items {
		v := e.check(t, r, it, scope, asCondition, !and)
		if v == nil { // a rule that does not decide
			continue
		}
		for i := range out {
			if and {
				out[i] = out[i] && v[i]
			} else {
				out[i] = out[i] || v[i]
			}
		}
	}
	return out
}

// checkFormat checks n's column's type or its values' format.
func (e *focusEvaluation) checkFormat(t testing.TB, r *focusRule, n *checkNode, c rowCheck) []bool {
	d, column := e.d, e.d.cols[n.ColumnName]
	switch n.CheckFunction {
	case "ColumnPresent":
		return c.all(column != nil)
	case "TypeString":
		if column != nil && d.typed {
			return c.all(column.typ == "VARCHAR")
		}
		return c.all(true) // CSV: every value is text
	case "TypeDecimal":
		if column != nil && d.typed {
			return c.all(isDecimalType(column.typ))
		}
		return c.perValue(func(v string) bool { _, ok := parseDecimal(v); return ok })
	case "TypeDateTime":
		if n.ExpectedType != "" && n.ExpectedType != "DateTime" {
			t.Fatalf("%s: TypeDateTime of ExpectedType %q", r.id, n.ExpectedType)
		}
		if column != nil && d.typed {
			return c.all(isDateTimeType(column.typ))
		}
		return c.perValue(isISODateTime)
	case "FormatDateTime":
		if column != nil && d.typed && isDateTimeType(column.typ) {
			return c.all(true) // an instant, which the file keeps in UTC
		}
		return c.perValue(isISODateTime)
	case "FormatNumeric", "CheckDecimalValue":
		if column != nil && d.typed && !isDecimalType(column.typ) && !strings.Contains(column.typ, "INT") {
			return c.all(false)
		}
		return c.perValue(func(v string) bool { _, ok := parseDecimal(v); return ok })
	case "FormatString":
		// String handling, as far as a value shows it: text (valid
		// UTF-8), and not empty or only spaces.
		return c.perValue(func(v string) bool { return utf8.ValidString(v) && strings.TrimSpace(v) != "" })
	case "FormatUnit":
		return c.perValue(unitFormat.MatchString)
	case "FormatCurrency":
		// A national currency's three-letter code (a virtual currency's
		// name is text only under VIRTUAL_CURRENCY_SUPPORTED, which its
		// rules' criteria name).
		return c.perValue(currencyFormat.MatchString)
	case "CheckNationalCurrency":
		return c.perValue(func(v string) bool { return e.m.currencies[v] })
	case "FormatKeyValue":
		return c.perValue(isKeyValue)
	}
	t.Fatalf("%s: %s is not a format check", r.id, n.CheckFunction)
	return nil
}

// checkValues compares values: with a constant, across columns, or
// counted per group.
func (e *focusEvaluation) checkValues(t testing.TB, r *focusRule, n *checkNode, scope []bool, c rowCheck) []bool {
	d, col, out := e.d, n.ColumnName, c.out
	switch n.CheckFunction {
	case "CheckValue", "CheckNotValue":
		if n.Value == nil {
			t.Fatalf("%s: %s without a Value", r.id, n.CheckFunction)
		}
		is := e.valueIs(t, r, col, n.Value)
		if n.CheckFunction == "CheckNotValue" {
			for i := range is {
				is[i] = !is[i]
			}
		}
		return is
	case "CheckSameValue", "CheckNotSameValue":
		same := c.each(func(i int) bool {
			a, okA := d.value(n.ColumnAName, i)
			b, okB := d.value(n.ColumnBName, i)
			return okA == okB && a == b
		})
		if n.CheckFunction == "CheckNotSameValue" {
			for i := range same {
				same[i] = !same[i]
			}
		}
		return same
	case "CheckGreaterOrEqualThanValue":
		var bound big.Rat
		if _, ok := bound.SetString(string(n.Value)); !ok {
			t.Fatalf("%s: %s is not a number", r.id, n.Value)
		}
		return c.perValue(func(v string) bool { x, ok := parseDecimal(v); return ok && x.Cmp(&bound) >= 0 })
	case "ColumnByColumnEqualsColumnValue":
		return c.each(func(i int) bool {
			a, okA := d.value(n.ColumnAName, i)
			b, okB := d.value(n.ColumnBName, i)
			res, okR := d.value(n.ResultColumnName, i)
			if !okA || !okB || !okR {
				return false
			}
			x, ok1 := parseDecimal(a)
			y, ok2 := parseDecimal(b)
			z, ok3 := parseDecimal(res)
			return ok1 && ok2 && ok3 && new(big.Rat).Mul(x, y).Cmp(z) == 0
		})
	case "CheckDistinctCount":
		var want int
		if err := json.Unmarshal(n.ExpectedCount, &want); err != nil {
			t.Fatalf("%s: ExpectedCount: %v", r.id, err)
		}
		// Per value of A among the rows in scope, the distinct non-null
		// values of B.
		distinct := map[string]map[string]bool{}
		for i := range out {
			a, okA := d.value(n.ColumnAName, i)
			if !scope[i] || !okA {
				continue
			}
			if distinct[a] == nil {
				distinct[a] = map[string]bool{}
			}
			if b, okB := d.value(n.ColumnBName, i); okB {
				distinct[a][b] = true
			}
		}
		return c.each(func(i int) bool {
			a, okA := d.value(n.ColumnAName, i)
			return !okA || len(distinct[a]) == want
		})
	}
	t.Fatalf("%s: %s is not a value check", r.id, n.CheckFunction)
	return nil
}

// valueIs is, per row, whether col holds value (JSON null: is null; a
// number: equal as a decimal; a string: the same text).
func (e *focusEvaluation) valueIs(t testing.TB, r *focusRule, col string, value json.RawMessage) []bool {
	out := make([]bool, e.d.rows)
	var want any
	if err := json.Unmarshal(value, &want); err != nil {
		t.Fatalf("%s: Value %s: %v", r.id, value, err)
	}
	for i := range out {
		v, ok := e.d.value(col, i)
		switch w := want.(type) {
		case nil:
			out[i] = !ok
		case string:
			out[i] = ok && v == w
		case float64:
			x, okX := parseDecimal(v)
			wr, _ := new(big.Rat).SetString(string(value))
			out[i] = ok && okX && x.Cmp(wr) == 0
		case bool:
			out[i] = ok && v == fmt.Sprint(w)
		default:
			t.Fatalf("%s: Value %s of an unknown kind", r.id, value)
		}
	}
	return out
}

// isKeyValue: a JSON object whose keys are unique and whose values are
// numbers, strings, true, false or null.
func isKeyValue(v string) bool {
	dec := json.NewDecoder(strings.NewReader(v))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return false
	}
	seen := map[string]bool{}
	for dec.More() {
		k, err := dec.Token()
		key, isKey := k.(string)
		if err != nil || !isKey || seen[key] {
			return false
		}
		seen[key] = true
		val, err := dec.Token()
		if err != nil {
			return false
		}
		if _, nested := val.(json.Delim); nested {
			return false
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return false
	}
	_, err = dec.Token()
	return err != nil // nothing after the object
}

// report counts the outcomes per keyword, and lists the failures.
func (e *focusEvaluation) report() (counts map[string]map[string]int, failures []ruleFailure) {
	counts = map[string]map[string]int{}
	for id, o := range e.outcomes {
		k := e.m.ModelRules[id].ValidationCriteria.Keyword
		if counts[k] == nil {
			counts[k] = map[string]int{}
		}
		status := o.status
		if status == "failed" && !o.required {
			status = "unmet alternative"
		}
		counts[k][status]++
		if status == "failed" {
			r := e.m.ModelRules[id]
			ex := ""
			if o.example >= 0 {
				var vals []string
				for _, c := range []string{r.Reference, "ChargeCategory", "ChargeClass", "ResourceType", "x_RowId"} {
					if v, ok := e.d.value(c, o.example); ok {
						vals = append(vals, c+"="+v)
					}
				}
				ex = " (e.g. " + strings.Join(vals, ", ") + ")"
			}
			failures = append(failures, ruleFailure{id, fmt.Sprintf("%s %s [%s]: %d rows: %s%s", k, id, e.d.name, o.violations, r.ValidationCriteria.MustSatisfy, ex)})
		}
	}
	sort.Slice(failures, func(i, j int) bool { return failures[i].id < failures[j].id })
	return counts, failures
}

type ruleFailure struct{ id, text string }
