"""The controller's handlers, one module per concern; each takes the controller's services first
(:class:`statemachines.services.ControllerServices`), never the controller itself."""
