package report_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/collsim/collsim/check"
	"github.com/collsim/collsim/report"
	"github.com/collsim/collsim/scenarios"
)

// ScreenshotPath is where TestHTMLInBrowser leaves its screenshot (and the
// page it loaded), relative to this package; it is ignored by git.
const screenshotDir = "testdata/screenshots"

// chromium finds a Chromium binary: $COLLSIM_CHROMIUM, else the usual names.
func chromium() (string, error) {
	if p := os.Getenv("COLLSIM_CHROMIUM"); p != "" {
		return p, nil
	}
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no chromium, chromium-browser, google-chrome or headless-shell on PATH (Debian: apt-get install -y chromium; .ci/run installs it)")
}

// skipBrowser skips the browser test, or fails it when
// COLLSIM_REQUIRE_BROWSER=1 (set by .ci/run once it has found Chromium), so
// that CI cannot pass without the test having run: go test does not print a
// skip without -v.
func skipBrowser(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("COLLSIM_REQUIRE_BROWSER") == "1" {
		t.Fatalf("COLLSIM_REQUIRE_BROWSER=1: "+format, args...)
	}
	t.Skipf(format, args...)
}

// browser starts headless Chromium with the flags it needs to start
// without a network (no sandbox, no GPU, no background traffic, a fresh
// profile). It skips the test only when Chromium is absent or cannot start
// at all.
func browser(t *testing.T) context.Context {
	t.Helper()
	bin, err := chromium()
	if err != nil {
		skipBrowser(t, "browser test skipped: %v", err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1500, 1100),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelT(); cancelC(); cancelA() })
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		skipBrowser(t, "browser test skipped: chromium at %s cannot run here: %v", bin, err)
	}
	return ctx
}

// TestHTMLInBrowser loads report pages in headless Chromium: no console
// errors or exceptions, no network requests, every variant's verdict shown,
// the racing spans and mis-consumed signals highlighted. The first page holds
// every tp8-shared-expert variant; the second, one variant of each other
// verdict (hang, dropped, build error, corruption without a race). Each
// saves a full-page screenshot under report/testdata/screenshots/ (tp8:
// report.png).
func TestHTMLInBrowser(t *testing.T) {
	ctx := browser(t)
	t.Run("tp8-shared-expert", func(t *testing.T) {
		sc, ok := scenarios.Lookup("tp8-shared-expert")
		require.True(t, ok)
		var vrs []*check.VariantReport
		for _, v := range sc.Variants {
			vr, err := check.RunVariant(sc, v, check.Options{Extra: []string{"budget=20"}})
			require.NoError(t, err)
			vrs = append(vrs, vr)
		}
		d, err := report.Build(sc, vrs)
		require.NoError(t, err)
		checkPage(t, ctx, d, "report")
		for _, v := range d.Variants {
			if v.Name == "buggy" {
				require.NotZero(t, count(t, ctx, `section.variant[data-variant="buggy"] rect.racing`), "the buggy variant's race is highlighted")
				require.NotZero(t, count(t, ctx, `section.variant[data-variant="buggy"] path.misconsumed`), "the buggy variant's mis-consumed signals are drawn")
			}
		}
	})
	t.Run("other-verdicts", func(t *testing.T) {
		d := &report.Data{Scenario: "other verdicts"}
		for _, sv := range [][2]string{
			{"nccl-order-mismatch", "count-differs"},
			{"moe-ep-dropped-allreduce", "per-layer"},
			{"trt-fused-collective", "fused"},
			{"symm-block-mismatch", "swapped-equal"},
		} {
			sc, ok := scenarios.Lookup(sv[0])
			if !ok {
				t.Logf("scenario %s not built in here; skipped", sv[0])
				continue
			}
			v, ok := sc.Variant(sv[1])
			require.True(t, ok, sv[1])
			vr, err := check.RunVariant(sc, v, check.Options{Extra: []string{"budget=0"}})
			require.NoError(t, err)
			rv, err := report.Capture(sc, vr)
			require.NoError(t, err)
			rv.Name = sv[0] + "-" + sv[1]
			d.Variants = append(d.Variants, rv)
		}
		if len(d.Variants) == 0 {
			t.Skip("no other scenarios built in")
		}
		checkPage(t, ctx, d, "other-verdicts")
	})
}

// count returns how many elements match a CSS selector.
func count(t *testing.T, ctx context.Context, sel string) int {
	t.Helper()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)))
	require.NoError(t, err, sel)
	return n
}

// checkPage writes d's page, loads it, checks it and saves a screenshot.
func checkPage(t *testing.T, ctx context.Context, d *report.Data, name string) {
	t.Helper()
	var page bytes.Buffer
	require.NoError(t, report.WriteHTML(&page, d))
	require.NoError(t, os.MkdirAll(screenshotDir, 0o755))
	htmlPath, err := filepath.Abs(filepath.Join(screenshotDir, name+".html"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(htmlPath, page.Bytes(), 0o644))

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var problems []string
	require.NoError(t, chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == "error" || e.Type == "warning" {
				var args []string
				for _, a := range e.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				problems = append(problems, fmt.Sprintf("console.%s: %s", e.Type, strings.Join(args, " ")))
			}
		case *runtime.EventExceptionThrown:
			msg := e.ExceptionDetails.Text
			if x := e.ExceptionDetails.Exception; x != nil {
				msg += " " + x.Description
			}
			problems = append(problems, "exception: "+msg)
		case *cdplog.EventEntryAdded:
			if e.Entry.Level == cdplog.EntryLevelError {
				problems = append(problems, "log: "+e.Entry.Text)
			}
		case *network.EventRequestWillBeSent:
			if u := e.Request.URL; !strings.HasPrefix(u, "file://") && !strings.HasPrefix(u, "data:") && u != "about:blank" {
				problems = append(problems, "network request: "+u)
			}
		}
	}))
	report := func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(problems, "\n")
	}
	// Navigate returns once the page has loaded, so the script has run.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("file://"+htmlPath)))
	rendered, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.dataset.rendered || ""`))
	require.NoError(t, err)
	require.Equal(t, "yes", rendered, "the page's script did not finish; console:\n%s", report())
	text := func(sel string) string {
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		require.NoError(t, err, sel)
		return s
	}

	for _, v := range d.Variants {
		sel := fmt.Sprintf(`section.variant[data-variant=%q]`, v.Name)
		require.Equal(t, v.Verdict, text(fmt.Sprintf(`.card[data-variant=%q] .verdict`, v.Name)), "%s: card verdict", v.Name)
		require.Equal(t, v.Verdict, text(sel+` h2 .verdict`), "%s: section verdict", v.Name)
		require.Equal(t, len(v.Spans), count(t, ctx, sel+` svg.timeline rect.span`), "%s: one rect per span", v.Name)

		wantRacing, wantMis := 0, 0
		for _, s := range v.Spans {
			for _, f := range s.Findings {
				if k := v.Findings[f].Kind; k == "race" || k == "mismatch" {
					wantRacing++
					break
				}
			}
		}
		for _, f := range v.Flows {
			if f.Mismatch {
				wantMis++
			}
		}
		racing, misconsumed := count(t, ctx, sel+` rect.racing`), count(t, ctx, sel+` path.misconsumed`)
		require.Equal(t, wantRacing, racing, "%s: racing spans highlighted", v.Name)
		require.Equal(t, wantMis, misconsumed, "%s: mis-consumed signals drawn", v.Name)
		require.Equal(t, len(v.Values), count(t, ctx, sel+` tr.value-diff`), "%s: value rows", v.Name)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	shotPath := filepath.Join(screenshotDir, name+".png")
	require.NoError(t, os.WriteFile(shotPath, shot, 0o644))
	t.Logf("screenshot: %s", shotPath)
	require.Empty(t, report(), "the page must load cleanly and offline")
}
