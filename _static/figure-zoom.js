// Figures full size on a tap: a figure in the text column of a phone is 342 px wide, its labels too small to
// read; a tap (or a click, or Enter) opens it at its drawn width (at least 700 px) in an overlay that scrolls
// sideways, and a tap or Escape closes it. The figures are SVG, so they stay crisp at any size.
"use strict";
(function () {
  let overlay = null;
  function close() {
    if (overlay) { overlay.remove(); overlay = null; document.body.classList.remove("book-zoom-open"); }
  }
  function open(img) {
    close();
    overlay = document.createElement("div");
    overlay.className = "book-zoom";
    overlay.setAttribute("role", "dialog");
    overlay.setAttribute("aria-label", "Figure at full size (tap or press Escape to close)");
    const big = document.createElement("img");
    big.src = img.currentSrc || img.src;
    big.alt = img.alt || "";
    big.style.width = Math.max(700, img.naturalWidth || 0) + "px";
    const hint = document.createElement("div");
    hint.className = "book-zoom-hint";
    hint.textContent = "Tap to close";
    overlay.append(hint, big);
    overlay.addEventListener("click", close);
    document.body.append(overlay);
    document.body.classList.add("book-zoom-open");
  }
  function setUp() {
    document.querySelectorAll(".cell_output img, figure img").forEach(function (img) {
      if (img.closest(".book-explore-control") || img.closest("a")) return;
      img.classList.add("book-zoomable");
      img.tabIndex = 0;
      img.title = "Open the figure at full size";
      img.addEventListener("click", function () { open(img); });
      img.addEventListener("keydown", function (e) { if (e.key === "Enter") open(img); });
    });
    document.addEventListener("keydown", function (e) { if (e.key === "Escape") close(); });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setUp);
  else setUp();
})();
