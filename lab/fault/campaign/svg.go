package campaign

import (
	"fmt"
	"html"
	"io"
	"slices"
	"time"
)

// The timeline's geometry, in SVG user units (pixels at 100%).
const (
	svgLeft   = 110 // room for the host names
	svgRight  = 20
	svgTop    = 58 // room for the fault labels
	svgRow    = 24
	svgBar    = 14
	svgWidth  = 1400
	svgLegend = 64
)

var verdictFill = map[string]string{"fit": "#43a047", "unfit": "#e53935", "unknown": "#9e9e9e"}

// Timeline draws every host's verdict over the campaign as a strip each,
// with the faults shaded (dark while injected, light until the fleet had
// recovered), each labelled by its number and kind, and every published
// swap marked on the strip of the voter it takes out: a black triangle when
// the truth of its moment calls for it, a red cross when not. Colour is
// never the only carrier: verdicts are also told apart by the strip's
// height (fit thin, unfit full, unknown hatched), as the legend says.
func (r *Result) Timeline(w io.Writer) {
	hosts := slices.Concat(r.Fleet.Voters, r.Fleet.Standbys)
	start, end := r.Started, r.Ended
	if end.Sub(start) <= 0 {
		end = start.Add(time.Second)
	}
	plot := float64(svgWidth - svgLeft - svgRight)
	x := func(t time.Time) float64 {
		f := float64(t.Sub(start)) / float64(end.Sub(start))
		return svgLeft + plot*min(max(f, 0), 1)
	}
	height := svgTop + svgRow*len(hosts) + 30 + svgLegend
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n",
		svgWidth, height, svgWidth, height)
	fmt.Fprintf(w, `<title>fleet-role fault campaign, seed %d: every host's verdict over time</title>`+"\n", r.Seed)
	fmt.Fprint(w, `<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">`+
		`<rect width="6" height="6" fill="#bdbdbd"/><line x1="0" y1="0" x2="0" y2="6" stroke="#616161" stroke-width="2"/></pattern></defs>`+"\n")
	fmt.Fprintf(w, `<rect width="%d" height="%d" fill="white"/>`+"\n", svgWidth, height)

	// Faults, under everything else.
	bottom := svgTop + svgRow*len(hosts)
	for i, f := range r.Faults {
		rec := f.Recovered
		if rec.IsZero() {
			rec = end
		}
		fmt.Fprintf(w, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#ffe082" fill-opacity="0.35"/>`+"\n",
			x(f.End), svgTop-4, max(x(rec)-x(f.End), 0.5), bottom-svgTop+8)
		fmt.Fprintf(w, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#ffb300" fill-opacity="0.45"><title>%s</title></rect>`+"\n",
			x(f.Start), svgTop-4, max(x(f.End)-x(f.Start), 0.5), bottom-svgTop+8,
			html.EscapeString(fmt.Sprintf("fault %d: %s; truth: %s; %s", i+1, f.Spec, truthLine(f.Truth), f.Outcome)))
		mark := ""
		if !f.OK {
			mark = " ✗"
		}
		fmt.Fprintf(w, `<text x="%.1f" y="%d" transform="rotate(-35 %.1f %d)" font-size="10">%d %s%s</text>`+"\n",
			x(f.Start), svgTop-8, x(f.Start), svgTop-8, i+1, html.EscapeString(string(f.Kind)), mark)
	}

	// Verdict strips: each decision's verdicts hold until the next.
	ds := r.decisions
	for row, h := range hosts {
		y := svgTop + row*svgRow
		fmt.Fprintf(w, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", svgLeft-8, y+svgBar-2, html.EscapeString(h))
		for k, d := range ds {
			next := end
			if k+1 < len(ds) {
				next = ds[k+1].Time
			}
			v := d.Hosts[h]
			if v == "" {
				continue
			}
			x0, x1 := x(d.Time), x(next)
			if x1 <= x0 {
				continue
			}
			switch v {
			case "fit":
				fmt.Fprintf(w, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", x0, y+svgBar/2-2, x1-x0, 4, verdictFill[v])
			case "unfit":
				fmt.Fprintf(w, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", x0, y, x1-x0, svgBar, verdictFill[v])
			default:
				fmt.Fprintf(w, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="url(#hatch)"/>`+"\n", x0, y, x1-x0, svgBar)
			}
		}
	}

	// Swaps, on the strip of the voter each takes out.
	for _, d := range ds {
		if d.Action != "swap" {
			continue
		}
		row := slices.Index(hosts, d.Out)
		if row < 0 {
			continue
		}
		right := false
		for _, f := range r.Faults {
			rec := f.Recovered
			if rec.IsZero() {
				rec = end
			}
			if !d.Time.Before(f.Start) && !d.Time.After(rec) && f.Truth.RightOut(d.Out) {
				right = true
			}
		}
		cx, cy := x(d.Time), float64(svgTop+row*svgRow+svgBar/2)
		tip := html.EscapeString(fmt.Sprintf("%s: swap %s -> %s", d.Time.Format(time.RFC3339), d.Out, d.In))
		if right {
			fmt.Fprintf(w, `<path d="M%.1f %.1f l-5 -9 h10 z" fill="black"><title>%s</title></path>`+"\n", cx, cy-2, tip)
		} else {
			fmt.Fprintf(w, `<path d="M%.1f %.1f l8 8 m0 -8 l-8 8" stroke="#b71c1c" stroke-width="2.5"><title>wrong %s</title></path>`+"\n", cx-4, cy-4, tip)
		}
	}

	// Time axis, a tick a minute (or every ten on a long campaign).
	fmt.Fprintf(w, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#424242"/>`+"\n", svgLeft, bottom+4, svgWidth-svgRight, bottom+4)
	step := time.Minute
	if end.Sub(start) > 40*time.Minute {
		step = 10 * time.Minute
	}
	for t := time.Duration(0); t <= end.Sub(start); t += step {
		tx := x(start.Add(t))
		fmt.Fprintf(w, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#424242"/><text x="%.1f" y="%d" text-anchor="middle">%dm</text>`+"\n",
			tx, bottom+4, tx, bottom+8, tx, bottom+20, int(t.Minutes()))
	}

	// Legend.
	ly := bottom + 36
	fmt.Fprintf(w, `<rect x="%d" y="%d" width="24" height="4" fill="%s"/><text x="%d" y="%d">fit (thin)</text>`+"\n", svgLeft, ly+5, verdictFill["fit"], svgLeft+30, ly+10)
	fmt.Fprintf(w, `<rect x="%d" y="%d" width="24" height="%d" fill="%s"/><text x="%d" y="%d">unfit (full)</text>`+"\n", svgLeft+110, ly, svgBar, verdictFill["unfit"], svgLeft+140, ly+10)
	fmt.Fprintf(w, `<rect x="%d" y="%d" width="24" height="%d" fill="url(#hatch)"/><text x="%d" y="%d">unknown (hatched)</text>`+"\n", svgLeft+230, ly, svgBar, svgLeft+260, ly+10)
	fmt.Fprintf(w, `<rect x="%d" y="%d" width="24" height="%d" fill="#ffb300" fill-opacity="0.45"/><text x="%d" y="%d">fault injected</text>`+"\n", svgLeft+380, ly, svgBar, svgLeft+410, ly+10)
	fmt.Fprintf(w, `<rect x="%d" y="%d" width="24" height="%d" fill="#ffe082" fill-opacity="0.35"/><text x="%d" y="%d">until every host is fit again</text>`+"\n", svgLeft+510, ly, svgBar, svgLeft+540, ly+10)
	fmt.Fprintf(w, `<path d="M%d %d l-5 -9 h10 z" fill="black"/><text x="%d" y="%d">swap published, as the truth calls for</text>`+"\n", svgLeft+715, ly+11, svgLeft+725, ly+10)
	fmt.Fprintf(w, `<path d="M%d %d l8 8 m0 -8 l-8 8" stroke="#b71c1c" stroke-width="2.5"/><text x="%d" y="%d">wrong swap</text>`+"\n", svgLeft+960, ly+2, svgLeft+975, ly+10)
	t := r.Totals
	fmt.Fprintf(w, `<text x="%d" y="%d">seed %d: %d faults, %d swap-worthy, %d caught, %d held by the gates, %d missed, %d wrong swaps, %d flaps; %d decisions published</text>`+"\n",
		svgLeft, ly+34, r.Seed, t.Faults, t.SwapWorthy, t.Caught, t.Gated, t.Missed, t.WrongSwaps, t.Flaps, t.Decisions)
	fmt.Fprintln(w, `</svg>`)
}
