"""The controller's handlers, one module per concern; each takes the controller first."""
