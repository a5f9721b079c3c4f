package views

import (
	"strconv"

	"switchyard/services"
)

// ---------------------------------------------------------------------------
// Settings → Model prices: the price table behind every estimated cost,
// with the admin's overrides (the general settings field pricing.models).

// PricesPageVM is the page: the form, the models seen without a price and the table.
type PricesPageVM struct {
	Form PriceFormVM
	// Unpriced are models that served requests in the last 24 hours
	// without a known price ("provider/model").
	Unpriced []string
	Rows     []PriceRowVM
}

// PriceFormVM is the "Set a price" form, values as typed.
type PriceFormVM struct {
	Model, Input, Output string
	Errors               FieldErrors
	Saved                string // the model just saved, for the status line
}

// Focus is the first field with a problem.
func (f PriceFormVM) Focus() string {
	return firstInvalid([]string{"model", "inputPerMTok", "outputPerMTok"}, f.Errors)
}

// PriceRowVM is one priced model.
type PriceRowVM struct {
	Model, Input, Output string
	Override             bool
	// Builtin is the list price an override replaces ("" when none).
	Builtin string
}

// PriceText renders a USD-per-1M-tokens price ("2.5" → "$2.50").
func PriceText(v float64) string {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if f := strconv.FormatFloat(v, 'f', 2, 64); len(f) >= len(s) {
		s = f
	}
	return "$" + s
}

// NewPriceRows lists the table for the page.
func NewPriceRows(table []services.PriceEntry) []PriceRowVM {
	out := make([]PriceRowVM, 0, len(table))
	for _, e := range table {
		r := PriceRowVM{Model: e.Model, Input: PriceText(e.InputPerMTok), Output: PriceText(e.OutputPerMTok), Override: e.Source == services.PriceOverride}
		if r.Override && e.Builtin != nil {
			r.Builtin = PriceText(e.Builtin.InputPerMTok) + " / " + PriceText(e.Builtin.OutputPerMTok)
		}
		out = append(out, r)
	}
	return out
}
