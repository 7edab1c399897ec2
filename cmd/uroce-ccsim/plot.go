package main

import (
	"fmt"
	"image/color"
	"os"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// smoothing is the window the plotted throughput is averaged over.
const smoothing = 200 * time.Microsecond

// plotRun writes a PNG with per-flow throughput above and the queue below.
func plotRun(name, title string, r *Record) error {
	thr := plot.New()
	thr.Title.Text = title
	thr.Y.Label.Text = fmt.Sprintf("throughput Gb/s (%v mean)", smoothing)
	thr.Y.Min = 0
	win := max(1, int(smoothing/r.Sample))
	for i := range r.Thru {
		pts := make(plotter.XYs, 0, len(r.Times)/win+1)
		for n := win; n <= len(r.Times); n += win {
			var s float64
			for m := n - win; m < n; m++ {
				s += r.Thru[i][m]
			}
			pts = append(pts, plotter.XY{X: float64(r.Times[n-1]) / 1e6, Y: s / float64(win)})
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color = flowColor(i)
		thr.Add(l)
		if len(r.Thru) <= 8 {
			thr.Legend.Add(fmt.Sprintf("flow %d", i), l)
		}
	}
	thr.Legend.Top = true

	q := plot.New()
	q.X.Label.Text = "time (ms)"
	q.Y.Label.Text = "queue KB"
	pts := make(plotter.XYs, len(r.Times))
	for n, t := range r.Times {
		pts[n] = plotter.XY{X: float64(t) / 1e6, Y: float64(r.Queue[n]) / 1024}
	}
	l, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	q.Add(l)
	q.Y.Min = 0

	const w, h = 20 * vg.Centimeter, 16 * vg.Centimeter
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadY: vg.Millimeter * 4, PadX: vg.Millimeter * 2, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2}
	plots := [][]*plot.Plot{{thr}, {q}}
	canvases := plot.Align(plots, tiles, dc)
	thr.Draw(canvases[0][0])
	q.Draw(canvases[1][0])

	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", name, err)
	}
	return f.Close()
}

func flowColor(i int) color.Color {
	pal := []color.RGBA{
		{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {214, 39, 40, 255},
		{148, 103, 189, 255}, {140, 86, 75, 255}, {227, 119, 194, 255}, {127, 127, 127, 255},
		{188, 189, 34, 255}, {23, 190, 207, 255},
	}
	return pal[i%len(pal)]
}
