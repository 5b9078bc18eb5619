"""The data plane: segment logs, leader epochs, high watermark and ISR, replica fetching."""
