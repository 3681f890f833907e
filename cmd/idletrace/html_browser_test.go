package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/idletrace/idletrace/internal/testenv"
)

// pageWidth is the browser window the HTML report must fit (issue 11
// item 12): a laptop's.
const pageWidth = 1280

// pageCheck is what the page reports about itself in the browser.
type pageCheck struct {
	ScrollWidth int `json:"scrollWidth"`
	ClientWidth int `json:"clientWidth"`
	// Overflowing names elements wider than the page's content box that
	// do not scroll inside themselves.
	Overflowing []string `json:"overflowing"`
	Plots       []struct {
		ID     string `json:"id"`
		Series []struct {
			Policy  string  `json:"policy"`
			Length  float64 `json:"length"`
			Width   float64 `json:"width"` // bounding box, px
			Height  float64 `json:"height"`
			Visible bool    `json:"visible"`
			Stroke  string  `json:"stroke"`
			SWidth  string  `json:"strokeWidth"`
			Dash    string  `json:"dash"`
			Inside  bool    `json:"inside"` // within its SVG's box
			Markers int     `json:"markers"`
			Legend  bool    `json:"legend"`
		} `json:"series"`
	} `json:"plots"`
	PercentileTables int `json:"percentileTables"`
}

const pageScript = `(() => {
  const de = document.documentElement;
  const r = {scrollWidth: de.scrollWidth, clientWidth: de.clientWidth, overflowing: [], plots: [],
    percentileTables: document.querySelectorAll('table.percentiles').length};
  for (const el of document.body.querySelectorAll('*')) {
    const b = el.getBoundingClientRect();
    if (b.right > de.clientWidth + 0.5 && !el.closest('.wide')) r.overflowing.push(el.tagName + (el.id ? '#' + el.id : '') + ' right ' + Math.round(b.right));
  }
  for (const svg of document.querySelectorAll('svg.dist')) {
    const sb = svg.getBoundingClientRect();
    const p = {id: svg.id, series: []};
    for (const path of svg.querySelectorAll('path.series')) {
      const b = path.getBoundingClientRect();
      const cs = getComputedStyle(path);
      const pol = path.dataset.policy;
      const esc = CSS.escape(pol);
      p.series.push({policy: pol, length: path.getTotalLength(), width: b.width, height: b.height,
        visible: cs.visibility === 'visible' && cs.display !== 'none' && cs.stroke !== 'none' && parseFloat(cs.strokeOpacity) > 0 && parseFloat(cs.opacity) > 0,
        stroke: cs.stroke, strokeWidth: cs.strokeWidth, dash: cs.strokeDasharray,
        inside: b.left >= sb.left - 1 && b.right <= sb.right + 1 && b.top >= sb.top - 1 && b.bottom <= sb.bottom + 1,
        markers: svg.querySelectorAll('.marker[data-policy="' + esc + '"]').length,
        legend: svg.querySelectorAll('.legend[data-policy="' + esc + '"]').length > 0});
    }
    r.plots.push(p);
  }
  return r;
})()`

// browser starts headless Chromium (Debian's package) for a test. Under
// make test (which installs it) and in CI the test must run, so a missing
// browser fails it; a plain go test skips it, saying what to install.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" || os.Getenv(testenv.RequireRootEnv) == "1" {
			t.Fatalf("chromium is not installed (make test and .ci/run install it; this test must run there): %v", err)
		}
		t.Skip("chromium is not installed (apt-get install chromium, or run make test as root)")
	}
	// The flags keep it off the network it would otherwise wait for.
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", false),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(pageWidth, 900),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return bctx
}

func loadPage(t *testing.T, ctx context.Context, file string) pageCheck {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(pageWidth, 900), chromedp.Navigate("file://"+file)); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	pc, err := chromedp.Run(ctx, chromedp.Evaluate[pageCheck](pageScript))
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return pc
}

// TestHTMLReportInBrowser (issue 11 item 12): the whatif HTML report, in a
// real browser 1280 px wide, has no horizontal overflow (wide tables scroll
// in their own box), and draws every policy's line in each latency plot,
// each distinguishable from the others where they coincide (its own dash
// pattern or width, markers, a legend entry), with a percentile table
// under each plot.
func TestHTMLReportInBrowser(t *testing.T) {
	ctx := browser(t)
	dir := t.TempDir()
	// The check itself: a page wider than the window is caught.
	wide := filepath.Join(dir, "wide.html")
	if err := os.WriteFile(wide, []byte(`<!DOCTYPE html><html><body><div style="width:2000px">x</div></body></html>`), 0o644); err != nil {
		t.Fatal(err)
	}
	if pc := loadPage(t, ctx, wide); pc.ScrollWidth <= pageWidth || len(pc.Overflowing) == 0 {
		t.Fatalf("a 2000 px page measured %d px wide, overflowing %v: the check is broken", pc.ScrollWidth, pc.Overflowing)
	}
	// The bundled trace's wake latencies are 0 or 1 µs: under these
	// policies most lines coincide exactly. Long policy names widen the
	// tables.
	policies := []string{"menu", "teo", "menu+margin=25", "menu+blkqos=10us/3ms", "haltpoll", "oracle",
		"haltpoll+guest_halt_poll_ns=400us+guest_halt_poll_grow=4+guest_halt_poll_shrink=3"}
	whatif := filepath.Join(dir, "whatif.html")
	args := []string{"whatif", bundledTrace, "--format", "html", "-o", whatif}
	for _, p := range policies {
		args = append(args, "--policy", p)
	}
	if r := runBin(t, args...); r.code != 0 {
		t.Fatalf("whatif: exit %d: %s", r.code, r.stderr)
	}
	compare := filepath.Join(dir, "compare.html")
	if r := runBin(t, "whatif", bundledTrace, "--policy", "haltpoll", "--measured", bundledTrace, "--format", "html", "-o", compare); r.code != 0 {
		t.Fatalf("whatif --measured: exit %d: %s", r.code, r.stderr)
	}

	for _, file := range []string{whatif, compare} {
		pc := loadPage(t, ctx, file)
		name := filepath.Base(file)
		if pc.ClientWidth > pageWidth || pc.ClientWidth < pageWidth-30 {
			t.Errorf("%s: viewport %d px wide, want %d", name, pc.ClientWidth, pageWidth)
		}
		if pc.ScrollWidth > pageWidth {
			t.Errorf("%s: document.scrollWidth %d > %d: the page overflows horizontally", name, pc.ScrollWidth, pageWidth)
		}
		if len(pc.Overflowing) > 0 {
			t.Errorf("%s: elements past the page's right edge, outside a scrolling box: %s", name, strings.Join(pc.Overflowing, "; "))
		}
		if file == compare {
			continue
		}
		if len(pc.Plots) != 2 {
			t.Fatalf("%s: %d latency plots, want 2 (wake-up, IO)", name, len(pc.Plots))
		}
		if pc.PercentileTables != 2 {
			t.Errorf("%s: %d percentile tables, want one under each plot", name, pc.PercentileTables)
		}
		for _, p := range pc.Plots {
			seen := map[string]bool{}
			styles := map[string]string{}
			for _, s := range p.Series {
				seen[s.Policy] = true
				if s.Length <= 0 || s.Width+s.Height <= 0 || !s.Visible || !s.Inside {
					t.Errorf("%s %s: %s's line not drawn: length %.1f, box %.1f×%.1f, visible %v, inside its plot %v",
						name, p.ID, s.Policy, s.Length, s.Width, s.Height, s.Visible, s.Inside)
				}
				if s.Markers == 0 || !s.Legend {
					t.Errorf("%s %s: %s has %d markers, legend entry %v", name, p.ID, s.Policy, s.Markers, s.Legend)
				}
				style := s.SWidth + " " + s.Dash // colour alone: the top line hides the other
				if o, dup := styles[style]; dup {
					t.Errorf("%s %s: %s and %s are drawn alike (%s): where they coincide one hides the other", name, p.ID, o, s.Policy, style)
				}
				styles[style] = s.Policy
			}
			for _, pol := range policies {
				if !seen[pol] {
					t.Errorf("%s %s: no line for %s (lines: %d)", name, p.ID, pol, len(p.Series))
				}
			}
			t.Logf("%s %s: %d lines", name, p.ID, len(p.Series))
		}
	}
}
