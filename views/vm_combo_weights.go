package views

import (
	"strconv"

	"switchyard/services"
)

// WeightSegmentVM is one target's part of a combo's weights bar: its share
// of the enabled targets' weights, as SVG x and width in percent (the CSP
// allows no style attributes, and SVG geometry is not one).
type WeightSegmentVM struct {
	Index int // target position, for the colour class
	X, W  string
	Label string // "1: fake/model-x (any connection) 60.0 %"
}

// weightSegmentColours is how many colour classes the bar cycles through.
const weightSegmentColours = 6

// Class is the segment's colour class.
func (s WeightSegmentVM) Class() string {
	return "weights__seg weights__seg--" + strconv.Itoa(s.Index%weightSegmentColours)
}

// weightSegments computes the weights bar of targets and writes each chip's
// weight text. Disabled targets are never drawn, so they get no share; when
// every enabled weight is 0 the targets are equally likely (the strategy's
// rule), and the bar says so.
func weightSegments(targets []services.Target, chips []TargetChipVM) []WeightSegmentVM {
	total, enabled := 0, 0
	for _, t := range targets {
		if t.IsEnabled() {
			total += max(t.WeightValue(), 0)
			enabled++
		}
	}
	if enabled == 0 {
		return nil
	}
	var out []WeightSegmentVM
	x := 0.0
	for i, t := range targets {
		w := max(t.WeightValue(), 0)
		if !t.IsEnabled() {
			chips[i].WeightText = "weight " + strconv.Itoa(w) + " · disabled"
			continue
		}
		share := float64(w) / float64(total)
		if total == 0 {
			share = 1 / float64(enabled)
		}
		pct := PercentText(share)
		chips[i].WeightText = "weight " + strconv.Itoa(w) + " · " + pct
		if share == 0 {
			continue
		}
		out = append(out, WeightSegmentVM{Index: i, X: svgPercent(x), W: svgPercent(share),
			Label: strconv.Itoa(i+1) + ": " + chips[i].Text + " " + pct})
		x += share
	}
	return out
}

// svgPercent writes a share in [0, 1] as an SVG percentage length.
func svgPercent(f float64) string {
	return strconv.FormatFloat(f*100, 'f', 2, 64) + "%"
}
