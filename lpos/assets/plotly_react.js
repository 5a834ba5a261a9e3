// The browser half of lpos.ui.plotly_react (its docstring says why): one Plotly div per chart, kept
// across runs and redrawn with Plotly.react when its figure changes. A Streamlit component v2 module:
// Streamlit calls the default export on mount and again whenever the chart's data changes.

// plotly.js, the plotly Python package's own copy, loaded once per page: every chart waits on one promise.
function loadPlotly(url) {
  window.lposPlotly ??= new Promise((resolve, reject) => {
    const script = document.createElement("script");
    script.src = url;
    // plotly.js sets window.Plotly; keep this copy, as Streamlit's own chart code sets window.Plotly too
    script.onload = () => resolve(window.Plotly);
    script.onerror = () => reject(new Error(`plotly.js did not load from ${url}`));
    document.head.appendChild(script);
  });
  return window.lposPlotly;
}

// Streamlit's grays (getGray30/70/90 in its frontend), which its theme variables do not carry.
const GRAYS = { light: ["#e6eaf1", "#808495", "#262730"], dark: ["#31333F", "#e6eaf1", "#fafafa"] };
const REM = 16; // px; Streamlit's chart theme sizes its fonts in rem

// lodash's merge, which Streamlit's theme uses: nested objects merged key by key, anything else replaced.
function merge(target, source) {
  for (const [key, value] of Object.entries(source)) {
    const plain = value && typeof value === "object" && !Array.isArray(value);
    target[key] = plain ? merge(target[key] && typeof target[key] === "object" ? target[key] : {}, value) : value;
  }
  return target;
}

function isLight(color) {
  const [r, g, b] = color.match(/\d+/g).map(Number); // getComputedStyle gives rgb(...)
  return 0.299 * r + 0.587 * g + 0.114 * b > 127;
}

// Streamlit's Plotly theme (its PlotlyChart's CustomTheme): the template's placeholder colours
// (streamlit/elements/lib/streamlit_plotly_theme.py) replaced, and its layout defaults merged in.
function themed(spec, parent) {
  const style = getComputedStyle(parent);
  const read = (name) => style.getPropertyValue(`--st-${name}`).trim();
  const colors = (name) => read(name).split(",").map((c) => c.trim());
  const background = getComputedStyle(document.querySelector('[data-testid="stApp"]')).backgroundColor;
  const [gray30, gray70, gray90] = GRAYS[isLight(background) ? "light" : "dark"];
  const placeholders = [
    ...colors("chart-categorical-colors").map((c, i) => [1 + i, c]),
    ...colors("chart-sequential-colors").map((c, i) => [11 + i, c]),
    ...colors("chart-diverging-colors").map((c, i) => [21 + i, c]),
    [35, gray30], [36, gray70], [37, gray90], [38, read("background-color")],
  ];
  for (const [number, color] of placeholders) {
    spec = spec.replaceAll(`"#${String(number).padStart(6, "0")}"`, JSON.stringify(color));
  }
  const figure = JSON.parse(spec);
  const font = read("font"), small = { color: gray70, size: 0.75 * REM };
  const axis = {
    zerolinecolor: gray30, gridcolor: gray30, tickcolor: gray30, tickfont: small, automargin: true,
    title: { font: { color: gray70, size: 0.875 * REM } }, minor: { gridcolor: gray30 },
  };
  const layout = (figure.layout ??= {});
  const template = ((layout.template ??= {}).layout ??= {});
  merge(template, {
    font: { color: gray70, family: font, size: 0.75 * REM, weight: 400 },
    title: { font: { family: read("heading-font"), size: REM, color: read("heading-color") },
             pad: { l: 0.25 * REM }, xanchor: "left", x: 0 },
    legend: { title: { font: small, side: "top" }, valign: "top", bordercolor: "transparent", borderwidth: 0,
              font: { size: 0.75 * REM, color: gray90 } },
    paper_bgcolor: read("background-color"), plot_bgcolor: read("background-color"),
    yaxis: { ...axis, ticklabelposition: "outside", title: { ...axis.title, standoff: 1.5 * REM } },
    xaxis: { ...axis, showgrid: false, zeroline: false, title: { ...axis.title, standoff: 1.25 * REM } },
    margin: { pad: 0.5 * REM, r: 0, l: 0 },
    hoverlabel: { bgcolor: read("background-color"), bordercolor: read("border-color"),
                  font: { color: gray70, family: font, size: 0.75 * REM } },
    coloraxis: { colorbar: { thickness: 16, xpad: 1.5 * REM, ticklabelposition: "outside", outlinecolor: "transparent",
                             outlinewidth: 8, len: 0.75, y: 0.5745, title: { font: axis.title.font }, tickfont: small } },
  });
  if (layout.title) layout.title = { ...layout.title, text: `<b>${layout.title.text ?? ""}</b>` };
  return figure;
}

// Streamlit's modebar choices for a chart without selections (its PlotlyChart), then the page's own.
const CONFIG = { displaylogo: false, showSendToCloud: false, modeBarButtonsToRemove: ["lasso2d", "select2d"] };

// Plotly's work on a div (a draw, a resize) goes on after its call returns: each is kept in div.lposBusy,
// which settles once all of them have, so that the div is purged only then (a purge under way makes the rest
// of a draw throw, "Cannot read properties of undefined").
function busy(div, work) {
  div.lposBusy = Promise.allSettled([div.lposBusy, work]).then(() => undefined); // no values kept, draw after draw
  return work;
}

export default function ({ data, parentElement }) {
  let div = parentElement.querySelector(":scope > .lpos-plotly");
  if (!div) {
    div = document.createElement("div");
    div.className = "lpos-plotly";
    parentElement.appendChild(div);
  }
  const done = () => { // Streamlit calls what the last call returned when it removes the chart
    div.lposResize?.disconnect();
    Promise.allSettled([div.lposBusy]).then(() => window.lposPlotly).then((Plotly) => Plotly?.purge(div), () => {});
  };
  div.dataset.key = data.key;
  // Streamlit calls this again with the same data when the viewer switches theme: redraw then too
  const look = getComputedStyle(parentElement).getPropertyValue("--st-background-color");
  if (div.dataset.drawn === data.digest && div.lposLook === look) return done; // the figure on the page
  div.dataset.drawing = data.digest; // cleared once drawn: the tests and the bench wait on it
  busy(div, loadPlotly(data.plotly)
    .then((Plotly) => {
      const figure = themed(data.figure, parentElement);
      const layout = { height: 450, ...figure.layout, autosize: true };
      delete layout.width; // the column's width, as st.plotly_chart's default width="stretch"
      // an animation's frames go with it (the Training timeline's play button)
      const config = { ...CONFIG, ...data.config };
      const drawn = figure.frames ? Plotly.react(div, { data: figure.data, layout, frames: figure.frames, config })
        : Plotly.react(div, figure.data, layout, config);
      return drawn.then(() => {
        // the column's width changes; a chart hidden meanwhile (a page left, a section folded) is fitted when it
        // shows again, as Plotly refuses to resize a div that is not displayed
        div.lposResize ??= new ResizeObserver(() => div.offsetParent !== null && busy(div, Plotly.Plots.resize(div)));
        div.lposResize.observe(div);
      });
    })
    .then(() => {
      if (div.dataset.drawing === data.digest) delete div.dataset.drawing; // a newer figure may be on its way
      div.dataset.drawn = data.digest;
      div.lposLook = look;
    })
    .catch((error) => {
      div.textContent = String(error);
      throw error;
    }));
  return done;
}
