import { BarController, BarElement, CategoryScale, Chart, Legend, LinearScale, LineController, LineElement, PointElement, Tooltip, type ChartConfiguration } from 'chart.js';
import { useEffect, useRef } from 'preact/hooks';

// Only the parts the console draws, so the bundle carries no more of Chart.js than that.
Chart.register(BarController, BarElement, CategoryScale, LinearScale, LineController, LineElement, PointElement, Tooltip, Legend);

const ACCENT = '#0b57d0';
export const SERIES_COLORS = [ACCENT, '#1e6b34', '#b35c00', '#7a3db8', '#b3261e'];

/**
 * A chart drawn by Chart.js (bundled, no CDN) on a canvas named for screen readers as an image; the
 * numbers it draws are always also in a table beside it, which is what assistive technology reads.
 * Not animated, so a screenshot or a test sees the final picture.
 */
export function ChartView({ label, config }: { label: string; config: ChartConfiguration }) {
  const canvas = useRef<HTMLCanvasElement>(null);
  const data = JSON.stringify(config.data);
  useEffect(() => {
    const chart = new Chart(canvas.current!, { ...config, options: { ...config.options, animation: false, responsive: true, maintainAspectRatio: false } });
    return () => chart.destroy();
  }, [data]);
  return (
    <div class="chart-box">
      <canvas ref={canvas} role="img" aria-label={label} />
    </div>
  );
}

export const barDataset = (label: string, data: number[], color = ACCENT) => ({ label, data, backgroundColor: color, borderColor: color });
