// Distributed RL with Ray: deck navigation (inlined by scripts/slides.py, no dependencies).
// Keys: right/left, space, PageDown/PageUp, Home/End; s = speaker notes; f = full screen.
// URL: #5 opens slide 5; ?notes opens the speaker view.
(function () {
  "use strict";
  var slides = Array.prototype.slice.call(document.querySelectorAll("section.slide"));
  var current = 0;
  var started = Date.now();

  // Shrink a slide's text until it fits its 1280x720 canvas (long code excerpts, tables).
  function fit(slide) {
    var content = slide.querySelector(".content");
    var wasCurrent = slide.classList.contains("current");
    slide.classList.add("current");
    var scale = 1;
    content.style.setProperty("--fit", scale);
    while (content.scrollHeight > content.clientHeight + 1 && scale > 0.5) {
      scale -= 0.04;
      content.style.setProperty("--fit", scale.toFixed(2));
    }
    var wide = Array.prototype.some.call(content.querySelectorAll("pre, table, svg"),
      function (el) { return el.scrollWidth > el.clientWidth + 1; });
    if (content.scrollHeight > content.clientHeight + 1 || wide) {
      slide.setAttribute("data-overflow", "true");
    }
    if (!wasCurrent) slide.classList.remove("current");
  }

  function layout() {
    var speaker = document.body.classList.contains("speaker");
    var w = window.innerWidth, h = window.innerHeight;
    var scale = Math.min(w / 1280, h / 720);
    document.documentElement.style.setProperty("--scale", scale);
    document.documentElement.style.setProperty("--speaker-scale",
      Math.min(w / 1280, (h * 0.62) / 720));
    return speaker;
  }

  function show(i) {
    current = Math.max(0, Math.min(slides.length - 1, i));
    slides.forEach(function (s, k) { s.classList.toggle("current", k === current); });
    if (location.hash !== "#" + (current + 1)) {
      history.replaceState(null, "", "#" + (current + 1));
    }
    document.body.setAttribute("data-current", current + 1);
  }

  document.addEventListener("keydown", function (e) {
    if (e.altKey || e.ctrlKey || e.metaKey) return;
    var k = e.key;
    if (k === "ArrowRight" || k === "ArrowDown" || k === " " || k === "PageDown" || k === "n") {
      show(current + 1);
    } else if (k === "ArrowLeft" || k === "ArrowUp" || k === "PageUp" || k === "p") {
      show(current - 1);
    } else if (k === "Home") {
      show(0);
    } else if (k === "End") {
      show(slides.length - 1);
    } else if (k === "s") {
      document.body.classList.toggle("speaker");
      layout();
    } else if (k === "f") {
      if (document.fullscreenElement) document.exitFullscreen();
      else document.documentElement.requestFullscreen();
    } else {
      return;
    }
    e.preventDefault();
  });
  document.addEventListener("click", function (e) {
    if (e.target.closest("a")) return;
    show(current + (e.clientX > window.innerWidth / 3 ? 1 : -1));
  });
  window.addEventListener("resize", layout);
  window.addEventListener("hashchange", function () {
    show(parseInt(location.hash.slice(1), 10) - 1 || 0);
  });
  setInterval(function () {
    var s = Math.floor((Date.now() - started) / 1000);
    document.getElementById("timer").textContent =
      Math.floor(s / 60) + ":" + ("0" + (s % 60)).slice(-2) + "  " + (current + 1) + "/" + slides.length;
  }, 1000);

  if (/[?&]notes\b/.test(location.search)) document.body.classList.add("speaker");
  layout();
  slides.forEach(fit);
  show((parseInt(location.hash.slice(1), 10) || 1) - 1);
  document.body.setAttribute("data-ready", "true");
})();
