// The book's print layout (tools/build_pdf.py loads it into the single-page HTML once MathJax is done, then calls
// these functions): the web page becomes the body of a book. Not linked from the HTML book (_ext/book_html.py
// leaves _static/pdf/ out of its pages).
window.bookPdf = {
  // The page as a book's body; returns the outline entries (level, title, id) in document order.
  prepare(parts) {

    const drop = (el) => el && el.remove();
    // A cell tagged hide-input shows its output only: in print its source is left out (its collapsed frame
    // with it), while hide-cell and hide-output cells are opened below.
    document.querySelectorAll('.cell.tag_hide-input > details.above-input, .cell.tag_hide-input > .cell_input')
      .forEach(drop);
    // Collapsed cells open (a <details> becomes a plain <div>: without its summary a browser would label it
    // "Details"), their "Show/Hide code cell ..." labels and every toggle button removed.
    // An inline formula and the punctuation right after it ("… t", ")") on one line: a line began with ")" (R7)
    document.querySelectorAll('mjx-container:not([display="true"])').forEach(m => {
      const box = m.parentElement && m.parentElement.matches('span.math') && m.parentElement.childNodes.length === 1
        ? m.parentElement : m;
      const next = box.nextSibling;
      if (!next || next.nodeType !== Node.TEXT_NODE) return;
      const lead = next.textContent.match(/^[)\]}.,;:!?’”]+/);
      if (!lead) return;
      const keep = document.createElement('span');
      keep.className = 'book-nobreak';
      box.replaceWith(keep);
      keep.append(box, lead[0]);
      next.textContent = next.textContent.slice(lead[0].length);
    });
    // A "Going deeper" fold-out (a sphinx-design dropdown) keeps its title, printed as a call-out's label
    // (print.css: .book-dropdown-title), not its chevron.
    document.querySelectorAll('details.sd-dropdown > summary').forEach(s => {
      const text = s.querySelector('.sd-summary-text') || s;
      const title = document.createElement('p');
      title.className = 'book-dropdown-title';
      title.innerHTML = text.innerHTML;
      s.parentElement.classList.add('book-dropdown');
      s.replaceWith(title);
    });
    document.querySelectorAll('summary, .toggle-button, button.copybtn, a.headerlink').forEach(drop);
    document.querySelectorAll('details').forEach(d => {
      const div = document.createElement('div');
      div.className = d.className + ' book-opened';
      while (d.firstChild) div.append(d.firstChild);
      d.replaceWith(div);
    });
    document.querySelectorAll('.toggle-hidden').forEach(e => e.classList.remove('toggle-hidden'));
    // The site's own print table of contents: the book has its own contents. (The single page holds the chapters
    // inside the front page's toctree-wrapper, which therefore stays.)
    document.querySelectorAll('#jb-print-docs-body').forEach(drop);
    // Empty frames: an output, an input or a whole cell with nothing to see.
    const visible = (el) => el.textContent.trim() !== '' ||
        el.querySelector('img, svg, mjx-container, table, video, iframe, canvas') !== null;
    document.querySelectorAll('.cell_output .output, .cell_output, div.highlight, .cell_input, .cell')
      .forEach(el => { if (!visible(el)) el.remove(); });
    // Code and outputs: one block per line, wrapped with a hanging indent past the line's own indentation.
    document.querySelectorAll('div.highlight pre, .cell_output pre, .output pre').forEach(pre => {
      const segments = [];
      const walk = (node, cls) => {
        node.childNodes.forEach(child => {
          if (child.nodeType === Node.TEXT_NODE) segments.push([child.textContent, cls]);
          else if (child.nodeType === Node.ELEMENT_NODE) walk(child, child.className || cls);
        });
      };
      walk(pre, '');
      const lines = [[]];
      segments.forEach(([text, cls]) => {
        text.split('\n').forEach((piece, i) => {
          if (i > 0) lines.push([]);
          if (piece) lines[lines.length - 1].push([piece, cls]);
        });
      });
      if (lines.length > 1 && lines[lines.length - 1].length === 0) lines.pop();
      if (pre.closest('.cell_input')) bookPdf.plumbing(lines);
      if (lines.length === 0) {  // a cell whose code only drove a widget
        const input = pre.closest('.cell_input');
        if (input) input.remove();
        return;
      }
      pre.textContent = '';
      lines.forEach(line => {
        const text = line.map(s => s[0]).join('');
        const indent = text.length - text.trimStart().length;
        const block = document.createElement('span');
        block.className = 'book-line';
        block.style.paddingLeft = `${indent + 4}ch`;
        block.style.textIndent = `-${indent + 4}ch`;
        line.forEach(([piece, cls]) => {
          const span = document.createElement('span');
          if (cls) span.className = cls;
          span.textContent = piece;
          block.append(span);
        });
        pre.append(block);
      });
      if (lines.length <= 12) {  // a short box moves to the next page whole
        [pre.closest('div.highlight'), pre.closest('.cell_output .output')]
          .forEach(box => { if (box) box.classList.add('book-short'); });
      } else {  // a long one split by a page leaves at least two lines of text on each side of the break
        const blocks = [...pre.children];
        const texts = blocks.map((b, i) => i).filter(i => blocks[i].textContent.trim() !== '');
        if (texts.length >= 4) {
          blocks.slice(0, texts[1]).forEach(b => b.classList.add('book-keep'));
          blocks.slice(texts[texts.length - 2], -1).forEach(b => b.classList.add('book-keep'));
        }
      }
    });
    // A paragraph that leads into a cell ("In code:") stays whole on the page of the cell's start; not one that
    // leads into a figure, which moves to the next page whole when it does not fit (kept with it, the paragraph
    // left more than half a page empty, 3 pages)
    document.querySelectorAll('p').forEach(p => {
      const next = p.nextElementSibling;
      if (next && next.classList.contains('cell') && p.textContent.trim().endsWith(':') &&
          !next.querySelector('figure, img, svg')) p.classList.add('book-lead');
    });
    // A paragraph that leads into a displayed equation ("... the bias:") ends on the equation's page: its last
    // lines go over with it rather than a line holding the colon alone (book-lead-eq: no break after it)
    document.querySelectorAll('p').forEach(p => {
      const next = p.nextElementSibling;
      if (next && next.matches('div.math, div.math-wrapper, .math-wrapper') && /[:,]\s*$/.test(p.textContent))
        p.classList.add('book-lead-eq');
    });
    // A heading keeps at least two lines of text under it on its page: a short paragraph after it stays whole
    // and with what follows (a heading at a page foot with one line under it, 1 page at c78739c)
    document.querySelectorAll('.bd-article h2, .bd-article h3, .bd-article h4').forEach(h => {
      const next = h.nextElementSibling;
      if (next && next.matches('p') && next.textContent.trim().length < 260) next.classList.add('book-keep-next');
    });
    // Whether nothing with text or a figure follows a cell in its chapter
    const lastInChapter = (cell) => {
      for (let el = cell; el && !el.matches('span[id^="document-"] + section'); el = el.parentElement) {
        const after = [...el.parentElement.children].slice([...el.parentElement.children].indexOf(el) + 1);
        if (after.some(sib => sib.textContent.trim() || sib.querySelector('img, svg'))) return false;
      }
      return true;
    };
    // A short output (up to 4 lines, no figure) stays on the page of its code's last lines: alone, it took a
    // chapter's last page (2 pages at c78739c)
    document.querySelectorAll('.cell_output').forEach(out => {
      const prev = out.previousElementSibling;
      if (prev && prev.matches('.cell_input') && !out.querySelector('img, svg, table, figure') &&
          out.querySelectorAll('pre .book-line').length <= 4) {
        out.classList.add('book-with-input');
        // the chapter's last cell moves whole (code of up to 30 lines): its code's last lines and the output
        // alone made a chapter's last page (1 page)
        if (lastInChapter(out.closest('.cell')) && prev.querySelectorAll('pre .book-line').length <= 30)
          prev.classList.add('book-short');
      }
    });
    // and the chapter's last cell takes the last lines of the paragraph before it along: alone, a whole short
    // cell made a chapter's last page of three lines (1 page)
    document.querySelectorAll('span[id^="document-"] + section').forEach(chapter => {
      const cells = chapter.querySelectorAll('.cell');
      const cell = cells[cells.length - 1];
      const before = cell && lastInChapter(cell) && cell.previousElementSibling;
      if (before && before.matches('p')) before.classList.add('book-lead-eq');
    });
    // and so does a cell's input or output frame with at most 12 lines in all
    document.querySelectorAll('.cell_input, .cell_output').forEach(frame => {
      if (frame.querySelectorAll('pre .book-line').length <= 12 && !frame.querySelector('img, svg, table'))
        frame.classList.add('book-short');
    });
    // Parts: a title page before each part's first chapter; the outline in document order.
    // The single page repeats section ids across chapters ("the-question"): each contents entry gets its own.
    const entries = [];
    const entry = (level, title, el, head) => {
      el.id = el.id && document.querySelectorAll('#' + CSS.escape(el.id)).length === 1 ? el.id
        : 'book-entry-' + entries.length;
      entries.push({level: level, title: title, id: el.id, head: head === undefined ? bookPdf.escape(title) : head,
                    heading: el.matches('h1, h2, h3, h4') ? el : null});
    };
    const article = document.querySelector('.bd-article') || document.body;
    const front = article.querySelector('section');
    const frontHeading = front && front.querySelector('h1');
    if (front && frontHeading) {  // the cover carries the title: the front page is the book's preface
      frontHeading.textContent = 'About this book';
      entry(0, 'About this book', frontHeading);
    }
    let numeral = 0;
    const roman = ['I', 'II', 'III', 'IV', 'V', 'VI', 'VII', 'VIII', 'IX', 'X'];
    parts.forEach((part, p) => {
      const anchors = part.docs.map(doc => document.getElementById('document-' + doc)).filter(Boolean);
      if (anchors.length === 0) return;
      const partId = 'book-part-' + (p + 1);
      if (part.numbered) {
        const page = document.createElement('div');
        page.className = 'book-part';
        page.id = partId;
        const label = document.createElement('div');
        label.className = 'book-part-number';
        label.textContent = 'Part ' + roman[numeral++];
        const title = document.createElement('div');
        title.className = 'book-part-title';
        title.textContent = part.caption;
        page.append(label, title);
        anchors[0].before(page);
      } else {
        const mark = document.createElement('span');  // inside the first chapter: on its first page
        mark.id = partId;
        const first = anchors[0].nextElementSibling;
        if (first && first.tagName === 'SECTION') first.prepend(mark); else anchors[0].before(mark);
      }
      entries.push({level: 0, title: (part.numbered ? 'Part ' + roman[numeral - 1] + '. ' : '') + part.caption,
                    id: partId});  // unique by construction
      anchors.forEach(anchor => {
        const chapter = anchor.nextElementSibling;
        if (!chapter || chapter.tagName !== 'SECTION') return;
        const h = chapter.querySelector('h1, h2');
        entry(1, bookPdf.headingText(h), h, bookPdf.headingHtml(h));
        chapter.querySelectorAll(':scope > section').forEach(section => {
          const sh = section.querySelector('h2, h3, h4');
          if (sh) entry(2, bookPdf.headingText(sh), sh, bookPdf.headingHtml(sh));
        });
      });
    });
    // The contents, with a page-number slot per entry (filled once the first print has said where they land).
    const nav = document.createElement('nav');
    nav.className = 'book-contents';
    const heading = document.createElement('h1');
    heading.textContent = 'Contents';
    const list = document.createElement('ol');
    entries.forEach(e => {
      const li = document.createElement('li');
      li.className = 'level-' + e.level;
      const a = document.createElement('a');
      a.href = '#' + e.id;
      if (e.heading) {  // the heading's own nodes: its mathematics typeset as in the text
        e.heading.childNodes.forEach(n => a.append(n.cloneNode(true)));
        a.querySelectorAll('a.headerlink, mjx-assistive-mml').forEach(n => n.remove());
      } else {
        a.textContent = e.title;
      }
      const dots = document.createElement('span');
      dots.className = 'dots';
      const num = document.createElement('span');
      num.className = 'page';
      num.dataset.target = e.id;
      num.textContent = '000';
      li.append(a, dots, num);
      list.append(li);
    });
    nav.append(heading, list);
    article.prepend(nav);
    return entries.map(e => ({level: e.level, title: e.title, id: e.id,
                               head: e.head === undefined ? bookPdf.escape(e.title) : e.head}));
  },

  // What a cell's code does only for the web page, left out of its printed lines (lines: [[text, class], ...]
  // per line): the slider call explore(draw, "name", [...], ...) with its import (the drawing function it calls
  // is printed; the panels are its output), and pandas' .style.set_uuid("...") (it only fixes the HTML ids;
  // df.style.format(...) prints the same table). Counted in bookPdf.plumbed.
  plumbing(lines) {
    const text = (line) => line.map(s => s[0]).join('');
    let removed = 0;
    for (let i = 0; i < lines.length; i++) {
      const t = text(lines[i]);
      if (/^from lib\.book\.widgets import explore\s*$/.test(t)) { lines.splice(i, 1); i--; removed++; continue; }
      if (/^explore\(/.test(t)) {
        let depth = 0, j = i;
        for (; j < lines.length; j++) {
          for (const c of text(lines[j])) depth += c === '(' || c === '[' ? 1 : c === ')' || c === ']' ? -1 : 0;
          if (depth <= 0) break;
        }
        lines.splice(i, j - i + 1);
        i--;
        removed++;
        continue;
      }
      const k = lines[i].findIndex(s => s[0] === 'set_uuid');
      if (k > 0 && lines[i][k - 1][0] === '.' && (lines[i][k + 1] || [])[0] === '(' &&
          /^["'][^"']*["']$/.test((lines[i][k + 2] || [''])[0]) && (lines[i][k + 3] || [])[0].startsWith(')')) {
        const close = lines[i][k + 3][0];
        lines[i].splice(k - 1, 5, ...(close.length > 1 ? [[close.slice(1), lines[i][k + 3][1]]] : []));
        removed++;
      } else if (/\.set_uuid\(/.test(t)) {  // tokens split otherwise: the line as plain text
        lines[i] = [[t.replace(/\.set_uuid\(["'][^"']*["']\)/, ''), '']];
        removed++;
      }
    }
    // blank lines left at the end (or doubled where a statement went)
    while (lines.length && text(lines[lines.length - 1]).trim() === '') lines.pop();
    for (let i = lines.length - 1; i > 0; i--)
      if (text(lines[i]).trim() === '' && text(lines[i - 1]).trim() === '' &&
          (i + 1 >= lines.length || text(lines[i + 1]).trim() === '')) lines.splice(i, 1);
    bookPdf.plumbed = (bookPdf.plumbed || 0) + removed;
  },

  // A page break before each of these headings (a heading whose page flips between two prints).
  breakBefore(ids) {
    ids.forEach(id => {
      const el = document.getElementById(id);
      // the heading itself (a section's own id would put the break before the enclosing chapter instead)
      const target = el && (el.matches('h1, h2, h3, h4') ? el : (el.querySelector('h1, h2, h3, h4') || el));
      if (target) target.style.breakBefore = 'page';
    });
  },

  // The contents' page numbers ({id: page}); an entry marked unnumbered keeps its empty slot.
  fillPages(pages) {
    document.querySelectorAll('nav.book-contents .page').forEach(
      s => { if (!s.dataset.unnumbered) s.textContent = pages[s.dataset.target] ?? '?'; });
  },

  // These entries' contents lines show no page number.
  unnumber(ids) {
    document.querySelectorAll('nav.book-contents .page').forEach(s => {
      if (ids.includes(s.dataset.target)) { s.dataset.unnumbered = '1'; s.textContent = ''; }
    });
  },

  escape(text) {
    const d = document.createElement('div');
    d.textContent = text;
    return d.innerHTML;
  },

  // A MathML tree (MathJax's assistive copy of a formula) as plain Unicode text, for the bookmarks and the
  // contents' text: \sqrt{d_k} -> "√dₖ", x^2 -> "x²", \frac{a}{b} -> "a/b". A sub- or superscript without a
  // Unicode form is written with _ or ^.
  mathText(node) {
    const SUB = {'0': '₀', '1': '₁', '2': '₂', '3': '₃', '4': '₄', '5': '₅', '6': '₆', '7': '₇', '8': '₈', '9': '₉',
      '+': '₊', '-': '₋', '−': '₋', '=': '₌', '(': '₍', ')': '₎', a: 'ₐ', e: 'ₑ', h: 'ₕ', i: 'ᵢ', j: 'ⱼ', k: 'ₖ',
      l: 'ₗ', m: 'ₘ', n: 'ₙ', o: 'ₒ', p: 'ₚ', r: 'ᵣ', s: 'ₛ', t: 'ₜ', u: 'ᵤ', v: 'ᵥ', x: 'ₓ'};
    const SUP = {'0': '⁰', '1': '¹', '2': '²', '3': '³', '4': '⁴', '5': '⁵', '6': '⁶', '7': '⁷', '8': '⁸', '9': '⁹',
      '+': '⁺', '-': '⁻', '−': '⁻', '=': '⁼', '(': '⁽', ')': '⁾', i: 'ⁱ', n: 'ⁿ', T: 'ᵀ'};
    const script = (text, table, mark) => {
      if ([...text].every(c => c === '′' || c === '″')) return text;
      const mapped = [...text].map(c => table[c]);
      if (text && mapped.every(Boolean)) return mapped.join('');
      return mark + ([...text].length > 1 ? '{' + text + '}' : text);
    };
    const group = (text) => /^[\p{L}\p{N}₀-ₜᵢ-ᵥⱼ]+$/u.test(text) ? text : '(' + text + ')';
    const walk = (n) => {
      if (n.nodeType === Node.TEXT_NODE) return n.textContent.trim();
      if (n.nodeType !== Node.ELEMENT_NODE) return '';
      const kids = [...n.children];
      const all = () => kids.map(walk).join('');
      switch (n.localName) {
        case 'mi': case 'mn': case 'mo': case 'mtext': case 'ms': return n.textContent.trim();
        case 'mspace': return ' ';
        case 'msub': return walk(kids[0]) + script(walk(kids[1]), SUB, '_');
        case 'msup': return walk(kids[0]) + script(walk(kids[1]), SUP, '^');
        case 'msubsup': return walk(kids[0]) + script(walk(kids[1]), SUB, '_') + script(walk(kids[2]), SUP, '^');
        case 'msqrt': return '√' + group(all());
        case 'mroot': return '√' + group(walk(kids[0]));
        case 'mfrac': return group(walk(kids[0])) + '/' + group(walk(kids[1]));
        case 'semantics': return kids.length ? walk(kids[0]) : '';
        case 'annotation': case 'annotation-xml': return '';
        default: return all();
      }
    };
    return walk(node).replace(/\s+/g, ' ').trim();
  },

  // A heading's text, its mathematics included (as Unicode), without its "#" link.
  headingText(h) {
    const walk = (n) => {
      if (n.nodeType === Node.TEXT_NODE) return n.textContent;
      if (n.nodeType !== Node.ELEMENT_NODE || n.matches('a.headerlink')) return '';
      if (n.localName === 'mjx-container') {
        const mml = n.querySelector('mjx-assistive-mml math, math');
        return mml ? bookPdf.mathText(mml) : n.textContent;
      }
      return [...n.childNodes].map(walk).join('');
    };
    return walk(h).replace(/#$/, '').replace(/\s+/g, ' ').trim();
  },

  // A heading as HTML for a running head: its text, its formulas as MathML (which Chromium typesets itself).
  headingHtml(h) {
    const walk = (n) => {
      if (n.nodeType === Node.TEXT_NODE) return bookPdf.escape(n.textContent);
      if (n.nodeType !== Node.ELEMENT_NODE || n.matches('a.headerlink')) return '';
      if (n.localName === 'mjx-container') {
        const mml = n.querySelector('mjx-assistive-mml math, math');
        return mml ? mml.outerHTML : bookPdf.escape(n.textContent);
      }
      return [...n.childNodes].map(walk).join('');
    };
    return walk(h).replace(/\s+/g, ' ').trim();
  },

  // The web page's sentences that are not true on paper, rewritten (_static/pdf/print_text.json); returns the
  // [where, web] pairs that found nothing.
  printText(rules) {
    const missed = [];
    const blocks = [...document.querySelectorAll('p, li, figcaption, h1, h2, h3, h4, dd, td')];
    const flat = (text) => text.replace(/\s+/g, ' ');  // the source's line breaks inside a paragraph
    const holds = (b, where) => flat(b.textContent).includes(where) &&
        ![...b.querySelectorAll('p, li, figcaption')].some(inner => flat(inner.textContent).includes(where));
    rules.forEach(rule => {
      // one block, or with "all" every block that holds the text
      const targets = rule.all ? blocks.filter(b => holds(b, rule.where))
        : [blocks.find(b => holds(b, rule.where))].filter(Boolean);
      rule.replace.forEach(([web, print, drop]) => {
        let hits = 0;
        targets.forEach(block => {
          const walker = document.createTreeWalker(block, NodeFilter.SHOW_TEXT);
          let node = walker.nextNode();
          while (node && !flat(node.textContent).includes(web)) node = walker.nextNode();
          if (!node) return;
          node.textContent = flat(node.textContent).replace(web, print);
          hits++;
          if (drop === 'drop-math') {  // the formula right after this text goes too ("sets $t$;" -> "")
            let next = node.nextSibling;
            while (next && next.nodeType === Node.TEXT_NODE && !next.textContent.trim()) next = next.nextSibling;
            if (next && next.nodeType === Node.ELEMENT_NODE && next.matches('span.math, mjx-container')) next.remove();
          }
          if (drop === 'drop-next') {  // the element right after this text goes (a command: "(`make pdf`)")
            const next = node.nextSibling;
            if (next && next.nodeType === Node.ELEMENT_NODE) next.remove();
          }
        });
        if (!hits) missed.push([rule.where, web]);
      });
    });
    return missed;
  },

  // Tables as a book numbers them: "Table N.k" (N its chapter, k its place there) with a caption above it,
  // the caption from _static/pdf/print_tables.json (the chapters' output tables carry none) or the table's own.
  // A pandas header with the index's name on a second row of its own (Jupyter's layout) becomes one row.
  // Returns the tables left without a caption and the entries that found no table.
  tables(entries) {
    const used = new Set();
    const uncaptioned = [];
    const flat = (text) => text.replace(/\s+/g, ' ').trim();
    document.querySelectorAll('table').forEach(t => {
      const head = t.tHead;
      if (head && head.rows.length === 2) {
        const [top, names] = head.rows;
        const cells = [...names.cells];
        if (cells.length === top.cells.length && cells[0].textContent.trim() &&
            !top.cells[0].textContent.trim() && cells.slice(1).every(c => !c.textContent.trim())) {
          top.cells[0].textContent = cells[0].textContent;
          names.remove();
        }
      }
    });
    document.querySelectorAll('span[id^="document-"] + section').forEach(chapter => {
      const doc = chapter.previousElementSibling.id.slice('document-'.length);
      const heading = chapter.querySelector('h1, h2');
      const number = heading && heading.querySelector('.section-number');
      const n = number ? number.textContent.trim().replace(/\.$/, '') : null;
      let k = 0;
      chapter.querySelectorAll('table').forEach(t => {
        if (t.closest('nav.book-contents, .bibliography, dl.citation')) return;
        const header = flat([...(t.tHead ? t.tHead.rows : [t.rows[0]])]
          .map(r => [...r.cells].map(c => c.textContent).join(' ')).join(' '));
        const i = entries.findIndex((e, j) => !used.has(j) && e.doc === doc && header.includes(e.header));
        let caption = t.querySelector(':scope > caption');
        if (i >= 0) {
          used.add(i);
          if (!caption) { caption = document.createElement('caption'); t.prepend(caption); }
          caption.textContent = entries[i].caption;
        }
        if (!caption || !caption.textContent.trim()) { uncaptioned.push(`${doc}: ${header.slice(0, 60)}`); return; }
        if (!n) return;
        k += 1;
        const label = document.createElement('span');
        label.className = 'caption-number';
        label.textContent = `Table ${n}.${k} `;
        caption.prepend(label);
        caption.classList.add('book-table-caption');
        t.classList.add('book-numbered');
      });
    });
    // (after the captions: print_tables.json names a table by its header as the chapter prints it)
    document.querySelectorAll('table').forEach(t => {
      // a code output's table (pandas) sets "1 x H100" with a times sign and "-12" with a minus, as the text does
      if (!t.closest('.cell_output, .output')) return;
      const walker = document.createTreeWalker(t, NodeFilter.SHOW_TEXT);
      for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        if (node.parentElement.closest('code, pre, mjx-container')) continue;
        const typeset = node.textContent.replace(/(\d) x (?=[\dA-Z])/g, '$1 × ').replace(/(^|[\s(])-(?=\d)/g, '$1−');
        if (typeset !== node.textContent) node.textContent = typeset;
      }
    });
    const unmatched = entries.filter((e, j) => !used.has(j)).map(e => `${e.doc}: ${e.header}`);
    return {uncaptioned, unmatched};
  },

  // Cross-references as a printed book gives them: a link to a chapter reads "Chapter N", to a section
  // "Section N.M", to a back-matter document "Appendix A" (which its heading then carries too), in place of the
  // target's title; "the chapter X", "the X chapter" and "the X" around it become "Chapter N". Returns the
  // number of links rewritten.
  crossrefs(appendices) {
    const letters = {};
    appendices.forEach((doc, i) => {
      const anchor = document.getElementById('document-' + doc);
      const section = anchor && anchor.nextElementSibling;
      const h = section && section.querySelector('h1, h2');
      if (!h) return;
      const letter = String.fromCharCode(65 + i);
      letters[section.id] = letter;
      const label = document.createElement('span');
      label.className = 'section-number';
      label.textContent = `Appendix ${letter}. `;
      h.prepend(label);
    });
    let changed = 0;
    document.querySelectorAll('a.reference.internal').forEach(a => {
      const inner = a.children.length === 1 ? a.firstElementChild : null;
      if (!inner || !inner.matches('span.std-ref, span.doc')) return;
      const url = new URL(a.getAttribute('href'), location.href);
      const target = url.hash && document.getElementById(decodeURIComponent(url.hash.slice(1)));
      if (!target) return;
      // the target is a section, a label just before its heading, or a label just before the section; a label
      // on anything else (a paragraph, a figure) keeps its text
      const next = target.nextElementSibling;
      let section = null;
      if (target.matches('section')) section = target;
      else if (next && next.matches('h1, h2, h3, h4')) section = target.parentElement;
      else if (next && next.matches('section') && !target.textContent.trim()) section = next;
      const h = section && section.querySelector(':scope > h1, :scope > h2, :scope > h3, :scope > h4');
      if (!h) return;
      let label = null;
      if (letters[section.id]) label = `Appendix ${letters[section.id]}`;
      else {
        const num = h.querySelector('.section-number');
        const n = num ? num.textContent.trim().replace(/\.$/, '') : '';
        if (/^\d+$/.test(n)) label = `Chapter ${n}`;
        else if (/^\d+(\.\d+)+$/.test(n)) label = `Section ${n}`;
      }
      if (!label) return;
      const text = inner.textContent;
      inner.textContent = label;
      const before = a.previousSibling && a.previousSibling.nodeType === Node.TEXT_NODE ? a.previousSibling : null;
      const after = a.nextSibling && a.nextSibling.nodeType === Node.TEXT_NODE ? a.nextSibling : null;
      if (before && /\b[Tt]he\s+chapter\s+$/.test(before.textContent)) {
        before.textContent = before.textContent.replace(/\b[Tt]he\s+chapter\s+$/, '');
      } else if (before && /\b[Tt]he\s+$/.test(before.textContent)) {
        before.textContent = before.textContent.replace(/\b[Tt]he\s+$/, '');
        if (after && /^\s+chapter\b/.test(after.textContent) && !/ chapter$/.test(text))
          after.textContent = after.textContent.replace(/^\s+chapter\b/, '');
      }
      changed++;
    });
    return changed;
  },

  // Soft hyphens in the running text's long words (Chromium has no hyphenation dictionary on Linux; the
  // patterns are TeX's US English ones, vendored under _static/pdf/vendor/hyphen/). Not in headings, code,
  // mathematics, numbers, links or the bibliography. Then, the page laid out at the width of the printed text
  // (tools/build_pdf.py sets the window to it), the soft hyphens of every word that no line end divides are
  // taken out again (they take no room there, so no line changes): the PDF's text (search, copy) then holds them
  // only in the words that a line end divides. Returns the number of those words.
  hyphenate() {
    const hyphenate = createHyphenator(hyphenationPatternsEnUs, {hyphenChar: '\u00AD', minWordLength: 7});
    const skip = 'pre, code, kbd, mjx-container, .math, .pasted-text, a, h1, h2, h3, h4, .citation, .bibliography, ' +
        'dl.citation, nav.book-contents, .book-part, table, .capacity-planner, .caption-number';
    let words = 0;
    const touched = [];
    document.querySelectorAll('.bd-article p, .bd-article li, .bd-article figcaption, .bd-article dd')
      .forEach(block => {
        const walker = document.createTreeWalker(block, NodeFilter.SHOW_TEXT);
        const nodes = [];
        for (let n = walker.nextNode(); n; n = walker.nextNode()) nodes.push(n);
        nodes.forEach(n => {
          if (!n.parentElement || n.parentElement.closest(skip)) return;
          const text = n.textContent;
          const done = text.replace(/[A-Za-z]{7,}/g, w => hyphenate(w));
          if (done !== text) { n.textContent = done; touched.push(n); }
        });
      });
    // a word keeps its soft hyphens only where its letters lie on more than one line
    const range = document.createRange();
    touched.forEach(n => {
      const text = n.textContent;
      const kept = text.replace(/[A-Za-z\u00AD]*\u00AD[A-Za-z\u00AD]*/g, (word, at) => {
        range.setStart(n, at);
        range.setEnd(n, at + word.length);
        const lines = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
        if (lines.size > 1) { words++; return word; }
        return word.replace(/\u00AD/g, '');
      });
      if (kept !== text) n.textContent = kept;
    });
    return words;
  },

  // The in-page calculator (lib/planner/web/planner.js, running in this page) as a worked table: its answers
  // for a few presets at its defaults, in place of the form. Returns the presets shown.
  calculator(names) {
    const root = document.querySelector('.capacity-planner[data-planner]');
    if (!root || !root.planner) return [];
    const select = root.querySelector('select[name=preset]');
    const shown = names.filter(n => [...select.options].some(o => o.value === n));
    const read = (table) => [...table.querySelectorAll('tr')].map(tr =>
      [tr.querySelector('th').textContent, tr.querySelector('td').textContent.trim()]);
    // every table of answers (serving; then what the calculator's version adds: time, a training step), each
    // captioned by the heading the page gives it
    const tables = [...root.querySelectorAll('table.planner-out')];
    const captions = tables.map((t, k) => {
      for (let el = t.previousElementSibling; el; el = el.previousElementSibling) {
        if (el.matches('h4, h5')) return el.textContent.trim();
        if (el.matches('table')) break;
      }
      return k === 0 ? 'Serving: weights, cache and GPUs' : '';
    });
    const answers = tables.map(() => []);
    const columns = tables.map(() => []);
    shown.forEach(name => {
      select.value = name;
      select.dispatchEvent(new Event('change', {bubbles: true}));
      tables.forEach((t, k) => {
        const rows = read(t);
        // a preset this table does not cover (its "problem" row says why, e.g. training a mixture of experts)
        // and for which it has no answer is left out of that table
        const problem = rows.find(([label]) => label === 'problem');
        const answered = rows.some(([label, v]) => label !== 'problem' && v !== '');
        if (problem && problem[1] && !answered) return;
        answers[k].push(rows);
        columns[k].push(name);
      });
    });
    const value = (n) => { const i = root.querySelector('[name=' + n + ']'); return i ? i.value : ''; };
    // A cell as print sets it: proportional text, identifiers (max_num_seqs) in monospace and never broken,
    // "x" between numbers or before a factor ("x0.4") as a times sign, an apostrophe as a typeset one
    const cell = (el, v) => {
      v.replace(/ x /g, ' × ').replace(/\bx(?=\d)/g, '×').replace(/(\w)'/g, '$1’').split(/([A-Za-z]+(?:_[A-Za-z0-9]+)+)/).forEach((piece, i) => {
        if (i % 2) { const c = document.createElement('code'); c.className = 'book-id'; c.textContent = piece; el.append(c); }
        else if (piece) el.append(piece);
      });
    };
    // the parenthesis that closes a value, where every preset's value ends with the same one: where the figure
    // comes from, said once in a note under the table
    const tail = (v) => {
      if (!v.endsWith(')')) return null;
      for (let i = v.length - 1, depth = 0; i >= 0; i--) {
        if (v[i] === ')') depth++;
        else if (v[i] === '(' && --depth === 0) return v.slice(i);
      }
      return null;
    };
    const build = (rows, names, caption) => {
      const table = document.createElement('table');
      table.className = 'book-calculator table';
      const head = document.createElement('tr');
      ['', ...names].forEach(t => { const th = document.createElement('th'); th.textContent = t; head.append(th); });
      const thead = document.createElement('thead');
      thead.append(head);
      const tbody = document.createElement('tbody');
      const notes = [];
      rows[0].forEach(([label], r) => {
        let values = rows.map(cols => cols[r][1]);
        if (values.every(v => v === '')) return;  // a row no preset fills (a problem none has)
        const common = tail(values[0]);
        const tr = document.createElement('tr');
        const th = document.createElement('th');
        th.textContent = label;
        if (common && common.length >= 30 && values.every(v => tail(v) === common)) {
          values = values.map(v => v.slice(0, v.length - common.length).trimEnd());
          const mark = document.createElement('sup');
          mark.textContent = String.fromCharCode(97 + notes.length);
          th.append(mark);
          notes.push([mark.textContent, label, common.slice(1, -1)]);
        }
        tr.append(th);
        values.forEach(v => { const td = document.createElement('td'); cell(td, v); tr.append(td); });
        tbody.append(tr);
      });
      const cap = document.createElement('caption');
      cap.textContent = caption.replace(/ x /g, ' × ');
      table.append(cap, thead, tbody);
      if (!notes.length) return [table];
      const note = document.createElement('p');
      note.className = 'book-table-note';
      notes.forEach(([m, label, text], i) => {
        const sup = document.createElement('sup');
        sup.textContent = m;
        note.append(...(i ? [' '] : []), sup, ` ${label[0].toUpperCase() + label.slice(1)}: `);
        cell(note, text);
        note.append('.');
      });
      return [table, note];
    };
    const unit = value('gpu_unit');
    const lead = document.createElement('p');
    lead.className = 'book-calculator-lead';
    lead.textContent = `Every preset is planned for this chapter’s question: a ` +
      `context of ${Number(value('context')).toLocaleString('en-US')} tokens, ${value('users')} concurrent ` +
      `sequence${value('users') === '1' ? '' : 's'}, ` +
      (value('gpu') && value('gpu') !== 'custom' ? `the ${value('gpu')} preset (` : '') +
      `${value('gpu_memory')} ${unit} of memory per GPU` + (value('gpu') && value('gpu') !== 'custom' ? ')' : '') +
      ` of which a fraction ${value('memory_fraction')} is usable, ` +
      (value('overhead') ? `an overhead of ${value('overhead')} GiB per GPU, `
        : `vLLM’s estimate of the activation peak and the non-torch memory as the overhead, `) +
      `${value('dtype')} weights and a ${value('kv_dtype')} cache.`;
    const figure = document.createElement('div');
    figure.className = 'book-calculator-print';
    figure.append(lead, ...tables.flatMap((t, k) => answers[k].length ? build(answers[k], columns[k], captions[k]) : []));
    root.replaceWith(figure);
    return shown;
  },

  // Links to the book's own files (the code download, an image) leave the page: with the book's address
  // (base) they point there; without one they are plain text, not links to the build's local server.
  links(base) {
    let changed = 0;
    document.querySelectorAll('a[href]').forEach(a => {
      const url = new URL(a.getAttribute('href'), location.href);
      if (url.origin !== location.origin || (url.pathname === location.pathname && url.hash)) return;
      changed++;
      if (base) {
        a.href = base.replace(/\/$/, '') + url.pathname + url.hash;
      } else {
        const span = document.createElement('span');
        span.className = a.className + ' book-unlinked';
        while (a.firstChild) span.append(a.firstChild);
        a.replaceWith(span);
      }
    });
    return changed;
  },

  // Short tables (up to 15 rows) move whole; returns what the print measures: how many columns of code fit a
  // code box, and the body's font as the browser resolved it.
  typeset(textWidthMm) {
    document.querySelectorAll('table').forEach(t => {
      // (not the calculator's tables, whose rows are paragraphs: moved whole, the first left half a page empty)
      if (t.rows.length <= 15 && !t.matches('.book-calculator')) t.classList.add('book-short');
    });
    // A slider's panels print one per row (lib.book.widgets' static grid, drawn a phone's width): a tall grid gets
    // up to 150 mm of height rather than the 80 mm of other figures, so that its panels are not a quarter of the
    // text's width
    document.querySelectorAll('.cell_output img').forEach(img => {
      if (img.naturalWidth && img.naturalHeight > 1.6 * img.naturalWidth) img.classList.add('book-tall');
      // a portrait figure (a diagram such as Fig. 13.2, drawn 116 mm wide with 9.5 pt text) gets up to 120 mm:
      // held to 80 mm it printed at 36 % of the text's width, its text at under 5 pt (R5). Not a taller one
      // (Fig. 4.1, 1.6 times as tall as wide): at 120 mm it no longer fitted under its page's text and left half
      // that page empty.
      else if (img.naturalWidth && img.naturalHeight > 1.3 * img.naturalWidth &&
               img.naturalHeight <= 1.5 * img.naturalWidth) img.classList.add('book-portrait');
    });
    // A chapter's last boxes end with it: their bottom padding and margin, carried past a full page, printed an
    // empty page before the next chapter (3 at 505a96d)
    document.querySelectorAll('span[id^="document-"] + section').forEach(chapter => {
      for (let last = chapter; last; last = last.lastElementChild) {
        last.style.setProperty('padding-bottom', '0', 'important');
        last.style.setProperty('margin-bottom', '0', 'important');
      }
    });
    const pre = document.querySelector('div.highlight pre');
    let columns = null;
    if (pre) {  // the page's width on paper, less the box's padding and borders, over one character's width
      const probe = document.createElement('span');
      probe.textContent = '0'.repeat(100);
      probe.style.whiteSpace = 'pre';
      pre.append(probe);
      const px = (el) => { const s = getComputedStyle(el);
        return ['paddingLeft', 'paddingRight', 'borderLeftWidth', 'borderRightWidth']
          .reduce((a, k) => a + parseFloat(s[k] || 0), 0); };
      const box = pre.closest('div.highlight');
      const inner = textWidthMm * 96 / 25.4 - px(pre) - (box ? px(box) : 0);
      columns = Math.floor(inner / (probe.getBoundingClientRect().width / 100));
      probe.remove();
    }
    const p = document.querySelector('.bd-article p');
    return {codeColumns: columns, bodyFont: p ? getComputedStyle(p).fontFamily : null};
  },
};
