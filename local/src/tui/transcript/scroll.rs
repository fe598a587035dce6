//! The bottom-anchored scroll model: per-entry layout cached per width, and a window that lays
//! out only the entries in view.

use super::render::layout;
use super::*;

impl Transcript {
    /// Rows of entry `i` (cached when not animated).
    pub(crate) fn lines_of(&self, i: usize, ctx: &LayoutCtx) -> Arc<Vec<Line<'static>>> {
        let Some(e) = self.entries.get(i) else {
            return Arc::new(Vec::new());
        };
        if !e.animated() {
            if let Some(c) = e.cache.borrow().as_ref() {
                if c.width == ctx.width && c.show_reasoning == ctx.show_reasoning {
                    return Arc::clone(&c.lines);
                }
            }
        }
        let lines = Arc::new(layout(&e.kind, ctx));
        if !e.animated() {
            *e.cache.borrow_mut() = Some(Cached {
                width: ctx.width,
                show_reasoning: ctx.show_reasoning,
                lines: Arc::clone(&lines),
            });
        }
        lines
    }

    fn height_of(&self, i: usize, ctx: &LayoutCtx) -> usize {
        self.lines_of(i, ctx).len()
    }

    /// The anchor of the top row when following the bottom; `None` when everything fits.
    fn follow_anchor(&self, ctx: &LayoutCtx, height: usize) -> Option<(usize, usize)> {
        let mut acc = 0usize;
        for i in (0..self.entries.len()).rev() {
            acc += self.height_of(i, ctx);
            if acc >= height {
                return Some((i, acc - height));
            }
        }
        None
    }

    /// Rows from (entry, line) to the end, counting no further than `limit`.
    fn rows_from(&self, ctx: &LayoutCtx, entry: usize, line: usize, limit: usize) -> usize {
        let mut acc = 0usize;
        for i in entry..self.entries.len() {
            let h = self.height_of(i, ctx);
            acc += if i == entry {
                h.saturating_sub(line)
            } else {
                h
            };
            if acc > limit {
                break;
            }
        }
        acc
    }

    /// Scroll up by `n` rows.
    pub(crate) fn scroll_up(
        &self,
        ctx: &LayoutCtx,
        height: usize,
        from: Scroll,
        n: usize,
    ) -> Scroll {
        let (mut entry, line) = match from {
            Scroll::Follow => match self.follow_anchor(ctx, height) {
                Some(a) => a,
                None => return Scroll::Follow,
            },
            Scroll::Anchor { entry, line } => {
                (entry.min(self.entries.len().saturating_sub(1)), line)
            }
        };
        let mut line = line as isize - n as isize;
        while line < 0 && entry > 0 {
            entry -= 1;
            line += self.height_of(entry, ctx) as isize;
        }
        Scroll::Anchor {
            entry,
            line: line.max(0) as usize,
        }
    }

    /// Scroll down by `n` rows; back to following once the bottom is in view.
    pub(crate) fn scroll_down(
        &self,
        ctx: &LayoutCtx,
        height: usize,
        from: Scroll,
        n: usize,
    ) -> Scroll {
        let Scroll::Anchor { mut entry, line } = from else {
            return Scroll::Follow;
        };
        if entry >= self.entries.len() {
            return Scroll::Follow;
        }
        let mut line = line + n;
        loop {
            let h = self.height_of(entry, ctx);
            if line < h || entry + 1 >= self.entries.len() {
                break;
            }
            line -= h;
            entry += 1;
        }
        if self.rows_from(ctx, entry, line, height) <= height {
            Scroll::Follow
        } else {
            Scroll::Anchor { entry, line }
        }
    }

    /// The visible rows for a view of `height` rows at `scroll`. Only entries in (or just
    /// above) the window are laid out.
    pub(crate) fn window(
        &self,
        ctx: &LayoutCtx,
        height: usize,
        scroll: Scroll,
    ) -> Vec<Line<'static>> {
        let mut rows: Vec<Line<'static>> = Vec::with_capacity(height);
        match scroll {
            Scroll::Follow => {
                let mut chunks: Vec<Arc<Vec<Line<'static>>>> = Vec::new();
                let mut acc = 0usize;
                for i in (0..self.entries.len()).rev() {
                    let l = self.lines_of(i, ctx);
                    acc += l.len();
                    chunks.push(l);
                    if acc >= height {
                        break;
                    }
                }
                let skip = acc.saturating_sub(height);
                let mut skipped = 0usize;
                for chunk in chunks.iter().rev() {
                    for l in chunk.iter() {
                        if skipped < skip {
                            skipped += 1;
                            continue;
                        }
                        rows.push(l.clone());
                    }
                }
            }
            Scroll::Anchor { entry, line } => {
                let mut skip = line;
                for i in entry..self.entries.len() {
                    for l in self.lines_of(i, ctx).iter() {
                        if skip > 0 {
                            skip -= 1;
                            continue;
                        }
                        rows.push(l.clone());
                        if rows.len() >= height {
                            return rows;
                        }
                    }
                }
            }
        }
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{ctx, text};
    use super::*;

    fn many(n: usize) -> Transcript {
        let mut t = Transcript::default();
        for i in 0..n {
            t.notice(format!("notice {i}"), Level::Info);
        }
        t
    }

    #[test]
    fn follow_shows_the_bottom_and_scrolling_moves_by_rows() {
        let t = many(10); // each notice: blank + 1 row = 2 rows; 20 rows total
        let c = ctx(40);
        let w = t.window(&c, 5, Scroll::Follow);
        assert_eq!(
            text(&w),
            vec!["  · notice 7", "", "  · notice 8", "", "  · notice 9"]
        );
        let up = t.scroll_up(&c, 5, Scroll::Follow, 3);
        assert_eq!(up, Scroll::Anchor { entry: 6, line: 0 });
        assert_eq!(text(&t.window(&c, 5, up))[1], "  · notice 6");
        // Scrolling down past the bottom returns to following.
        assert_eq!(
            t.scroll_down(&c, 5, up, 2),
            Scroll::Anchor { entry: 7, line: 0 }
        );
        assert_eq!(t.scroll_down(&c, 5, up, 3), Scroll::Follow);
        // Up past the top clamps.
        assert_eq!(
            t.scroll_up(&c, 5, up, 1000),
            Scroll::Anchor { entry: 0, line: 0 }
        );
    }
}
