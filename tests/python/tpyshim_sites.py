"""Line numbers of '# site:TAG' comments, shared by tests that cannot import
tpyshim (it needs the test library)."""


def site_lines(filename):
    sites = {}
    with open(filename) as f:
        for number, text in enumerate(f, 1):
            if "# site:" in text:
                sites[text.split("# site:")[1].split()[0]] = number
    return sites
