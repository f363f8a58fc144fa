from animus_flows.cli import main

main()
