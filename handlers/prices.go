package handlers

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"switchyard/services"
	"switchyard/services/settings"
	"switchyard/services/stats"
	"switchyard/views"
)

// Settings → Model prices: the price table behind every estimated cost and
// the admin's overrides of it. Saving and removing are
// a patch of pricing.models in the general document, the same as
// PATCH /api/settings.

// GeneralPatcher patches the general settings document
// (*settings.Document[settings.General]).
type GeneralPatcher interface {
	Patch(ctx context.Context, body []byte, ifMatch string) (*settings.Snapshot[settings.General], error)
}

// PriceTable lists the priced models (services.Prices).
type PriceTable interface {
	Table() []services.PriceEntry
}

// Prices serves the Model prices page.
type Prices struct {
	Layout
	Settings GeneralPatcher
	Prices   PriceTable
	// Stats names the models served without a price (nil = none shown).
	Stats TrafficSummaries
}

const pricesTitle, pricesHref = "Model prices", "/settings/prices"

// Price form messages.
const (
	msgPriceModel = "Enter the model as provider/model, such as openai/gpt-4o."
	msgPriceValue = "Enter a price in USD per 1M tokens, such as 2.50 (0 to 1,000,000)."
)

// List renders the page.
func (h *Prices) List(c echo.Context) error {
	return h.render(c, http.StatusOK, views.PriceFormVM{})
}

func (h *Prices) render(c echo.Context, status int, form views.PriceFormVM) error {
	vm := views.PricesPageVM{Form: form, Rows: views.NewPriceRows(h.Prices.Table())}
	if h.Stats != nil {
		seen := map[string]bool{}
		for _, u := range h.Stats.Summary(stats.Window24h).ByModel {
			if u.Unpriced > 0 && !seen[u.ID] {
				seen[u.ID] = true
				vm.Unpriced = append(vm.Unpriced, u.ID)
			}
		}
		sort.Strings(vm.Unpriced)
	}
	return h.page(c, status, pricesTitle, pricesHref, views.PricesPage(vm))
}

// Update saves the price of one model (422 with the form on a problem).
func (h *Prices) Update(c echo.Context) error {
	v := form(c)
	f := views.PriceFormVM{Model: strings.TrimSpace(v.Get("model")), Input: strings.TrimSpace(v.Get("inputPerMTok")),
		Output: strings.TrimSpace(v.Get("outputPerMTok")), Errors: views.FieldErrors{}}
	if p, m, ok := strings.Cut(f.Model, "/"); !ok || p == "" || m == "" {
		f.Errors["model"] = msgPriceModel
	}
	price := func(field, s string) float64 {
		n, err := strconv.ParseFloat(strings.TrimPrefix(s, "$"), 64)
		if err != nil || n < 0 || n > 1_000_000 {
			f.Errors[field] = msgPriceValue
		}
		return n
	}
	in, out := price("inputPerMTok", f.Input), price("outputPerMTok", f.Output)
	if len(f.Errors) > 0 {
		return h.render(c, http.StatusUnprocessableEntity, f)
	}
	body, _ := json.Marshal(map[string]any{"pricing": map[string]any{"models": map[string]any{
		f.Model: map[string]float64{"inputPerMTok": in, "outputPerMTok": out}}}})
	if _, err := h.Settings.Patch(c.Request().Context(), body, ""); err != nil {
		verr, ok := validation(err)
		if !ok {
			return err
		}
		for k, msg := range verr.Fields {
			switch {
			case strings.HasSuffix(k, ".inputPerMTok"):
				f.Errors["inputPerMTok"] = msgPriceValue
			case strings.HasSuffix(k, ".outputPerMTok"):
				f.Errors["outputPerMTok"] = msgPriceValue
			case strings.Contains(msg, "unknown provider"):
				f.Errors["model"] = "No provider is named " + strings.SplitN(f.Model, "/", 2)[0] + ". Use a provider id from Connections."
			default:
				f.Errors["model"] = msgPriceModel
			}
		}
		return h.render(c, http.StatusUnprocessableEntity, f)
	}
	NoteAudit(c, "settings.prices.update", f.Model)
	toast(c, "success", "Price of "+f.Model+" saved.")
	return h.render(c, http.StatusOK, views.PriceFormVM{Saved: f.Model})
}

// Delete removes the override of one model; the built-in price (if any) applies again.
func (h *Prices) Delete(c echo.Context) error {
	model := strings.TrimSpace(form(c).Get("model"))
	if model == "" {
		return services.ErrNotFound
	}
	body, _ := json.Marshal(map[string]any{"pricing": map[string]any{"models": map[string]any{model: nil}}})
	if _, err := h.Settings.Patch(c.Request().Context(), body, ""); err != nil {
		return err
	}
	NoteAudit(c, "settings.prices.remove", model)
	toast(c, "success", "Price override of "+model+" removed.")
	return h.render(c, http.StatusOK, views.PriceFormVM{})
}
