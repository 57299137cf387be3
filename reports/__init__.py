"""reports: render run directories into incident reports, gate summaries and budget reviews."""
