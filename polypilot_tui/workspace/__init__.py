"""Sessions' folders and git worktrees, through the git CLI: made, counted, diffed, finished."""
